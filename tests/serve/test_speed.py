"""``predict/speed.py``: words/s over batches, warm-up left out, and a 95% bootstrap interval that holds the mean."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ner_app.errors import NerAppError
from ner_app.predict.speed import batch_stream, bootstrap_speed, measure_speed, timed_batches, token_sentences


def test_constant_batches_have_a_zero_width_interval():
    speed = bootstrap_speed([(100, 0.5)] * 20, warmup=3)
    assert (
        speed.mean == pytest.approx(200)
        and speed.low == pytest.approx(200)
        and speed.high == pytest.approx(200)
    )
    assert (speed.batches, speed.warmup, speed.words, speed.seconds) == (20, 3, 2000, pytest.approx(10.0))


def test_interval_holds_the_mean_and_matches_a_direct_bootstrap():
    rng = np.random.default_rng(1)
    timed = [
        (int(w), float(s)) for w, s in zip(rng.integers(50, 150, 40), rng.uniform(0.1, 0.3, 40), strict=True)
    ]
    speed = bootstrap_speed(timed, warmup=0, resamples=2000, seed=7)
    rates = [w / s for w, s in timed]
    assert speed.mean == pytest.approx(sum(rates) / len(rates))
    assert speed.low < speed.mean < speed.high
    # the oracle: the same resamples drawn one by one
    draw = np.random.default_rng(7).integers(0, len(rates), size=(2000, len(rates)))
    means = sorted(float(np.mean([rates[i] for i in row])) for row in draw)
    assert speed.low == pytest.approx(np.percentile(means, 2.5)) and speed.high == pytest.approx(
        np.percentile(means, 97.5)
    )


def test_warm_up_batches_are_run_but_not_timed():
    calls: list[int] = []

    def tag(batch):  # noqa: ANN001, ANN202  # the first two calls are slow, as a cold start is
        calls.append(len(batch))
        time.sleep(0.3 if len(calls) <= 2 else 0.0)

    timed = timed_batches(tag, batch_stream([["a", "b"], ["c"]], 3), count=4, warmup=2)
    assert len(calls) == 6 and len(timed) == 4
    assert all(seconds < 0.15 for _, seconds in timed)
    assert [words for words, _ in timed] == [5, 4, 5, 4]  # sentences cycled: ab c ab | c ab c | ...


def test_sentences_are_predicts_and_empty_input_is_refused():
    assert token_sentences(["Alice flew to Paris. Bob stayed.", ""]) == [
        ["Alice", "flew", "to", "Paris", "."],
        ["Bob", "stayed", "."],
    ]
    with pytest.raises(NerAppError, match="no words"):
        measure_speed(lambda batch: None, ["", "  "])
    with pytest.raises(NerAppError, match="no timed batches"):
        bootstrap_speed([], warmup=0)
