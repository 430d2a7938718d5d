"""The logged training loss of an epoch is the token-weighted mean of every batch's loss, checked against the
batches of a real run whose data mixes one-token and very long sentences (length bucketing puts them in
separate batches, whose losses differ by orders of magnitude); and the logging interval follows the data
size, so Lightning never warns about it."""

from __future__ import annotations

import csv
import math
import random
import warnings
from pathlib import Path

import pytest

import train
from ner_app.report.run_files import learning_curves, read_log
from ner_app.train.module import TaggerModule

pytestmark = pytest.mark.system  # trains tiny runs: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["alpha", "beta", "gamma", "delta", "Paris", "Bob", "Acme", "said", "the", "of", "in", "Rome"]
TAGS = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "B-ORG", "I-ORG"]


def write_mixed_corpus(folder: Path, seed: int = 0) -> tuple[int, int]:
    """CoNLL files (IOB2) of many one-token sentences and a few very long ones, like a corpus of headlines and
    whole tables; returns (one-token sentences, long sentences) of train."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    short, long = 20, 4
    for name in ("train", "valid", "test"):
        blocks = [f"{rng.choice(WORDS)} O" for _ in range(short)]
        for _ in range(long):
            length = rng.randint(250, 400)
            tags: list[str] = []
            for _ in range(length):  # IOB2: an I- tag only after a tag of its type
                tag = rng.choice(TAGS)
                tags.append(tag if not tag.startswith("I-") or tags and tags[-1][2:] == tag[2:] else "O")
            blocks.append("\n".join(f"{rng.choice(WORDS)} {t}" for t in tags))
        rng.shuffle(blocks)
        (folder / f"{name}.txt").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return short, long


def test_epoch_loss_is_the_token_weighted_mean_of_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, run = tmp_path / "data", tmp_path / "run"
    write_mixed_corpus(data)
    seen: list[tuple[int, float, int, list[int]]] = []  # (epoch, batch loss, tokens, sentence lengths)
    real_step = TaggerModule.training_step

    def recording_step(self, batch, batch_idx):  # the real step; its loss and the batch's tokens are kept
        loss = real_step(self, batch, batch_idx)
        lengths = batch["mask"].sum(dim=1).tolist()
        seen.append((self.current_epoch, float(loss.detach()), int(sum(lengths)), lengths))
        return loss

    monkeypatch.setattr(TaggerModule, "training_step", recording_step)
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        f"data.dir={data}",
        "elmo.enabled=false",
        "data.batch_size=4",
        "trainer.max_epochs=3",
        "trainer.log_every_n_steps=50",
        "trainer.threads=1",
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert train.main(args) == 0
    # 20 one-token sentences in 5 batches and 4 long ones in 1: fewer than 50; the interval followed the data
    messages = [str(w.message) for w in caught]
    assert not any("log_every_n_steps" in m or "logging interval" in m for m in messages), messages

    epochs = sorted({epoch for epoch, *_ in seen})
    assert epochs == [0, 1, 2]
    batches = [s for s in seen if s[0] == 0]
    # the sampler put one-token and long sentences in separate batches, and their losses differ widely
    assert any(set(lengths) == {1} for *_, lengths in batches)
    assert any(min(lengths) >= 250 for *_, lengths in batches)
    per_token = [loss / tokens for _, loss, tokens, _ in batches]
    totals = [loss for _, loss, _, _ in batches]
    assert max(totals) > 100 * min(totals)

    with open(run / "logs/metrics.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    logged = {int(r["epoch"]): float(r["train_token_loss"]) for r in rows if r.get("train_token_loss")}
    assert sorted(logged) == epochs  # one value per epoch
    for epoch in epochs:
        mine = [(loss, tokens) for e, loss, tokens, _ in seen if e == epoch]
        expected = math.fsum(loss for loss, _ in mine) / sum(tokens for _, tokens in mine)
        assert logged[epoch] == pytest.approx(expected, rel=1e-12)
    # ... which is not what averaging the batches' own means gives (the old curve's way), by far
    assert abs(sum(per_token) / len(per_token) - logged[0]) > 0.05 * logged[0]

    # the per-step series is its own column: 6 batches an epoch, so every 3rd step is logged (half an epoch)
    steps = [(int(r["epoch"]), int(r["step"])) for r in rows if r.get("train_loss")]
    assert steps == [(e, 6 * e + k) for e in epochs for k in (2, 5)]
    # the report draws the epoch values, numbered as the console numbers epochs (1..N), and each epoch's
    # throughput (two logged steps in every epoch)
    loss, dev, speed = learning_curves(read_log(run))
    assert loss == {e + 1: logged[e] for e in epochs} and list(dev) == list(speed) == [1, 2, 3]


def test_epoch_loss_of_a_resumed_run_is_the_uninterrupted_ones(tmp_path: Path) -> None:
    """Stopped after epoch 1 and resumed to 3, the log holds each epoch's loss once, equal to the value of the
    run that was never stopped (the sums restart with each epoch; checkpoints fall between epochs)."""

    def epoch_losses(run: Path, epochs: int, resume: bool = False) -> dict[int, list[float]]:
        args = [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={run}",
            f"data.dir={ROOT / 'tests/data/tiny_conll'}",
            "elmo.enabled=false",
            "model.dropout=0.3",
            f"trainer.max_epochs={epochs}",
            "trainer.threads=1",
        ]
        assert train.main(args + (["--resume"] if resume else [])) == 0
        values: dict[int, list[float]] = {}
        with open(run / "logs/metrics.csv", newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row.get("train_token_loss"):
                    values.setdefault(int(row["epoch"]), []).append(float(row["train_token_loss"]))
        return values

    whole = epoch_losses(tmp_path / "whole", 3)
    epoch_losses(tmp_path / "parts", 1)
    parts = epoch_losses(tmp_path / "parts", 3, resume=True)
    assert sorted(whole) == [0, 1, 2] and all(len(v) == 1 for v in whole.values())
    assert parts == whole
