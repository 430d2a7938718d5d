"""ECE, reliability bins, log loss and entity correctness against hand computations."""

from __future__ import annotations

import math

import pytest

from ner_app.text.reliability import (
    correct_entities,
    expected_calibration_error,
    log_loss,
    note_uncalibrated,
    reliability_bins,
)


def test_ece_equals_a_hand_computation() -> None:
    scores = [0.05, 0.15, 0.95, 0.92, 0.97, 0.55, 1.0, 0.6]
    correct = [False, True, True, True, False, True, True, False]
    # bins: [0,.1): 0.05 wrong; [.1,.2): 0.15 right; [.5,.6): 0.55 right; [.6,.7): 0.6 wrong;
    # [.9,1]: 0.95 0.92 0.97 1.0 -> 3 of 4 right, mean 0.96
    by_hand = (
        1 * abs(0 - 0.05) + 1 * abs(1 - 0.15) + 1 * abs(1 - 0.55) + 1 * abs(0 - 0.6) + 4 * abs(0.75 - 0.96)
    ) / 8
    assert expected_calibration_error(scores, correct) == pytest.approx(by_hand, abs=1e-12)
    bins = reliability_bins(scores, correct)
    assert [b.count for b in bins] == [1, 1, 0, 0, 0, 1, 1, 0, 0, 4]
    assert bins[9].confidence == pytest.approx(0.96) and bins[9].accuracy == 0.75
    assert bins[2].confidence == bins[2].accuracy == 0.0 and bins[6].low == 0.6


def test_perfectly_calibrated_and_empty_cases() -> None:
    assert expected_calibration_error([0.25] * 4, [True, False, False, False]) == pytest.approx(0.0)
    assert expected_calibration_error([], []) == 0.0 and log_loss([], []) == 0.0
    # out-of-range scores go to the end bins (a probability above 1 must never be lost)
    assert [b.count for b in reliability_bins([1.0004, -0.1], [True, False], 10)] == [1] + [0] * 8 + [1]
    with pytest.raises(ValueError, match="2 scores but 1 correctness labels"):
        expected_calibration_error([0.1, 0.2], [True])


def test_log_loss_by_hand() -> None:
    got = log_loss([0.9, 0.2, 1.0], [True, False, False])
    want = -(math.log(0.9) + math.log(0.8) + math.log(1e-12)) / 3
    assert got == pytest.approx(want, rel=1e-4)  # 1 - (1 - 1e-12) is not exactly 1e-12 in floats


def test_an_entity_is_correct_when_span_and_type_match_exactly() -> None:
    gold = [("PER", 0, 2), ("LOC", 4, 5)]
    predicted = [("PER", 0, 2), ("PER", 0, 1), ("ORG", 4, 5), ("LOC", 4, 5)]
    assert correct_entities(predicted, gold) == [True, False, False, True]


def test_the_uncalibrated_note_is_said_once_per_model(capsys) -> None:
    note_uncalibrated(False, "/models/a-test-model")
    note_uncalibrated(False, "/models/a-test-model")
    note_uncalibrated(True, "/models/calibrated")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "/models/a-test-model: no calibration record" in err[0]
