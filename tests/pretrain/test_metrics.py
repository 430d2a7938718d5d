"""Pretraining's ``metrics.json`` round-trips through its typed record: what ``PretrainMetrics.save`` writes,
``PretrainMetrics.read`` reads back equal, and every record kept in results/ reads and is written back byte for
byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ner_app.pretrain.metrics import HeldoutScores, PretrainMetrics
from tests.helpers import REPO


def record() -> PretrainMetrics:
    sentence = {"forward": 7.25, "backward": 7.5, "mean": 7.375, "predicted_tokens": 120}
    document = {"forward": 6.5, "backward": 6.75, "mean": 6.625, "predicted_tokens": 120}
    scores = HeldoutScores(
        "data/heldout.txt", 20, 3, "document", {"document": document, "sentence": sentence}
    )
    return PretrainMetrics(
        steps=30,
        epochs=1.25,
        processes=1,
        train_tokens_per_s=None,
        train_tokens_timed=0,
        vocab_size=50,
        parameters=12_345,
        exported_step=20,
        heldout={"heldout.txt": scores},
    )


def test_a_record_round_trips(tmp_path: Path) -> None:
    metrics = record()
    path = metrics.save(tmp_path)
    assert path == tmp_path / "metrics.json"
    again = PretrainMetrics.read(path)
    assert again == metrics
    assert again.save(tmp_path / "again").read_bytes() == path.read_bytes()
    shown = json.loads(path.read_text())["heldout"]["heldout.txt"]
    assert shown["mean"] == 6.625 and shown["context"] == "document"  # the first context's numbers, flat


RECORDS = sorted(p for p in REPO.glob("results/**/metrics.json") if '"heldout"' in p.read_text())


@pytest.mark.skipif(not RECORDS, reason="no pretraining records in results/")
def test_every_kept_record_reads_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    """results/*/metrics.json of pretraining runs, written by ``save``: read, checked, and written back."""
    for k, path in enumerate(RECORDS):
        metrics = PretrainMetrics.read(path)
        assert metrics.steps > 0 and metrics.heldout, path
        assert metrics.save(tmp_path / str(k)).read_bytes() == path.read_bytes(), path


def test_a_record_of_an_earlier_version_reads(tmp_path: Path) -> None:
    """Written before processes, exported_step and held-out contexts existed (the shipped news biLM's record):
    one process, the last step exported, its one perplexity that of the sentence context."""
    numbers = {"forward": 9.5, "backward": 8.5, "mean": 9.0, "predicted_tokens": 40}
    old = {"steps": 80, "epochs": 1.5, "train_tokens_per_s": 12.5, "train_tokens_timed": 800}
    old |= {
        "vocab_size": 50,
        "parameters": 99,
        "heldout": {"h.txt": {"path": "h.txt", "sentences": 4, **numbers}},
    }
    (tmp_path / "metrics.json").write_text(json.dumps(old))
    metrics = PretrainMetrics.read(tmp_path / "metrics.json")
    assert (metrics.processes, metrics.exported_step) == (1, 80)
    scores = metrics.heldout["h.txt"]
    assert (scores.context, scores.contexts, scores.documents) == ("sentence", {"sentence": numbers}, None)
    shipped = REPO / "data" / "bilm_news" / "metrics.json"
    if shipped.is_file():
        assert PretrainMetrics.read(shipped).processes == 1
