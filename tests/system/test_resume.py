"""Exact resume (docs/reliability.md): a run stopped at any epoch (tagger) or step (biLM) and continued with
``--resume`` ends bit for bit like the uninterrupted run, with the layer cache on and off and with each
learning-rate schedule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import train
from ner_app.cli.commands import main
from ner_app.pretrain.metrics import PretrainMetrics
from tests.helpers import tiny_overrides, write_grammar

pytestmark = pytest.mark.system  # trains and resumes tiny runs: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


def train_args(run: Path, cache: Path | None, bilm: tuple[Path, Path], *extra: str) -> list[str]:
    # The settings: no dropout, patience beyond the run, one thread.
    return [
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={run}",
        f"data.dir={TINY}",
        f"elmo.cache_dir={cache if cache else 'null'}",
        f"elmo.options={bilm[0]}",
        f"elmo.weights={bilm[1]}",
        "trainer.patience=40",
        "trainer.threads=1",
        *extra,
    ]


def final_state(run: Path) -> dict[str, torch.Tensor]:
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return checkpoint["state_dict"]


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name, tensor in a.items():
        torch.testing.assert_close(b[name], tensor, atol=0, rtol=0, msg=name)


@pytest.mark.parametrize(("stop", "cached"), [(2, True), (5, False)])
def test_tagger_resume_is_exact(tmp_path: Path, tiny_bilm_files, stop: int, cached: bool) -> None:
    cache = tmp_path / "cache" if cached else None
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train.main(train_args(whole, cache, tiny_bilm_files, "trainer.max_epochs=7")) == 0
    assert train.main(train_args(parts, cache, tiny_bilm_files, f"trainer.max_epochs={stop}")) == 0
    assert train.main([*train_args(parts, cache, tiny_bilm_files, "trainer.max_epochs=7"), "--resume"]) == 0
    assert_same_weights(final_state(whole), final_state(parts))
    # The per-step losses of the resumed epochs are those of the uninterrupted run, and the log keeps the rows
    # from before the stop.
    rows = [(p / "logs" / "metrics.csv").read_text().splitlines() for p in (whole, parts)]
    loss = [[r for r in log if r.count(",") and "train_loss" not in r] for log in rows]
    assert len(loss[0]) == len(loss[1])
    scores = [json.loads((p / "metrics.json").read_text()) for p in (whole, parts)]
    for split in ("dev", "test"):
        for m in scores:
            m[split].pop("sentences_per_s")
        assert scores[0][split] == scores[1][split]


def test_plateau_schedule_resumes_exactly(tmp_path: Path, tiny_bilm_files) -> None:
    """The plateau scheduler's state (best dev F1, epochs without it) travels in last.ckpt: a run stopped at
    epoch 3 and continued to 7 lowers the lr at the same epochs as the uninterrupted one."""
    schedule = ("optim.schedule=plateau", "optim.plateau_patience=0")
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train.main(train_args(whole, None, tiny_bilm_files, *schedule, "trainer.max_epochs=7")) == 0
    assert train.main(train_args(parts, None, tiny_bilm_files, *schedule, "trainer.max_epochs=3")) == 0
    assert (
        train.main([*train_args(parts, None, tiny_bilm_files, *schedule, "trainer.max_epochs=7"), "--resume"])
        == 0
    )
    assert_same_weights(final_state(whole), final_state(parts))
    lrs = [
        torch.load(p / "checkpoints" / "last.ckpt", weights_only=True)["optimizer_states"][0]["param_groups"][
            0
        ]["lr"]
        for p in (whole, parts)
    ]
    assert lrs[0] == lrs[1] < 0.01  # the schedule did lower it


def test_linear_schedule_refuses_another_max_epochs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A linear schedule decays to 0 at the last step of trainer.max_epochs: a --resume that changes it would
    continue another schedule, so it is refused (other runs may change max_epochs)."""
    run = tmp_path / "run"
    base = [
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={run}",
        f"elmo.cache_dir={tmp_path / 'c'}",
        "trainer.threads=1",
        "optim.schedule=linear",
    ]
    assert train.main([*base, "trainer.max_epochs=1"]) == 0
    capsys.readouterr()
    assert train.main([*base, "trainer.max_epochs=2", "--resume"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "(trainer.max_epochs: 1 -> 2)" in err[0], err
    assert (
        "trainer.max_epochs stays as it was in this run: its learning-rate schedule is laid out over it"
        in err[0]
    )


def last_checkpoint_writes(last: Path) -> set[tuple[int, int]]:
    """The distinct files that have been ``last`` so far (each atomic write is a new file), seen once."""
    try:
        stat = last.stat()
    except FileNotFoundError:
        return set()
    return {(stat.st_ino, stat.st_mtime_ns)}


@pytest.mark.slow
def test_linear_schedule_resumes_exactly_after_sigterm(tmp_path: Path, tiny_bilm_files) -> None:
    """A linear schedule is laid out over trainer.max_epochs, so its run is stopped for real (SIGTERM after
    its second epoch's checkpoint, in a child process) rather than by a shorter max_epochs; --resume then ends
    bit for bit as the uninterrupted run, with gradient accumulation on."""
    keys = (
        "optim.schedule=linear",
        "optim.warmup_fraction=0.2",
        "trainer.accumulate_grad_batches=2",
        "trainer.max_epochs=12",
    )
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train.main(train_args(whole, None, tiny_bilm_files, *keys)) == 0
    command = [sys.executable, str(ROOT / "train.py"), *train_args(parts, None, tiny_bilm_files, *keys)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last, seen, deadline = parts / "checkpoints" / "last.ckpt", set(), time.monotonic() + 240
    while len(seen) < 2:
        assert child.poll() is None, "the run finished before the signal"
        assert time.monotonic() < deadline, "the second checkpoint never came"
        seen |= last_checkpoint_writes(last)
        time.sleep(0.002)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 143, err[-2000:]
    assert not (parts / "metrics.json").exists() and 1 <= torch.load(last, weights_only=True)["epoch"] < 11
    assert train.main([*train_args(parts, None, tiny_bilm_files, *keys), "--resume"]) == 0
    assert_same_weights(final_state(whole), final_state(parts))
    scores = [json.loads((p / "metrics.json").read_text()) for p in (whole, parts)]
    for split in ("dev", "test"):
        for m in scores:
            m[split].pop("sentences_per_s")
        assert scores[0][split] == scores[1][split]


def test_last_checkpoint_is_written_after_every_epoch(tmp_path: Path) -> None:
    """last.ckpt is the last epoch's state, not the last improvement's: Lightning 2.6 writes its ``save_last``
    copy only when the monitored score improved, so a killed run redid the epochs since (here dev F1 stays 0
    for the first 3 epochs of configs/tiny.yaml, and last.ckpt held epoch 1)."""
    run = tmp_path / "run"
    args = [
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={run}",
        f"elmo.cache_dir={tmp_path / 'c'}",
        "trainer.max_epochs=3",
        "trainer.threads=1",
    ]
    assert train.main(args) == 0
    last = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    best = torch.load(run / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    assert (last["epoch"], last["global_step"]) == (2, 9)  # 3 epochs of 3 batches
    assert (best["epoch"], best["global_step"]) == (0, 3)  # dev F1 0, 0, 0: the first stays the best
    assert json.loads((run / "metrics.json").read_text())["dev"]["f1"] == 0.0


def best_of(run: Path) -> tuple[dict[str, torch.Tensor], float]:
    """best.ckpt's weights and the best score that last.ckpt's checkpoint callback carries."""
    last = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    (state,) = [
        v for k, v in last["callbacks"].items() if k.startswith("ModelCheckpoint{'monitor': 'val_f1'")
    ]
    best = torch.load(run / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    return best["state_dict"], float(state["best_model_score"])


@pytest.mark.slow
def test_moved_run_folder_resumes_with_its_best(tmp_path: Path, tiny_bilm_files) -> None:
    """A run folder moved (or copied) before --resume keeps its best score and best.ckpt: plain Lightning
    forgets the score when ``dirpath`` changed, so the first epoch after the resume overwrote the best."""
    whole, parts, moved = tmp_path / "whole", tmp_path / "parts", tmp_path / "elsewhere" / "moved"
    assert train.main(train_args(whole, None, tiny_bilm_files, "trainer.max_epochs=9")) == 0
    assert train.main(train_args(parts, None, tiny_bilm_files, "trainer.max_epochs=6")) == 0
    moved.parent.mkdir()
    parts.rename(moved)
    assert train.main([*train_args(moved, None, tiny_bilm_files, "trainer.max_epochs=9"), "--resume"]) == 0
    (weights, score), (moved_weights, moved_score) = best_of(whole), best_of(moved)
    assert moved_score == score
    assert_same_weights(weights, moved_weights)
    dev = [json.loads((run / "metrics.json").read_text())["dev"] for run in (whole, moved)]
    for d in dev:
        d.pop("sentences_per_s")
    assert dev[0] == dev[1] and dev[0]["f1"] == pytest.approx(score)  # dev is reported from the best weights


def test_relocated_state_keeps_paths_outside_the_folder() -> None:
    from ner_app.runtime.moved_checkpoint import relocate_state

    state = {
        "dirpath": "/a/run/checkpoints",
        "best_model_path": "/a/run/checkpoints/best.ckpt",
        "last_model_path": "/elsewhere/last.ckpt",
        "best_model_score": 0.5,
        "best_k_models": {"/a/run/checkpoints/best.ckpt": 0.5},
        "kth_best_model_path": "/a/run/checkpointsX",
    }
    moved = relocate_state(state, "/a/run/checkpoints", "/b/run2/checkpoints")
    assert moved == {
        "dirpath": "/b/run2/checkpoints",
        "best_model_path": "/b/run2/checkpoints/best.ckpt",
        "last_model_path": "/elsewhere/last.ckpt",
        "best_model_score": 0.5,
        "best_k_models": {"/b/run2/checkpoints/best.ckpt": 0.5},
        "kth_best_model_path": "/a/run/checkpointsX",
    }
    assert state["dirpath"] == "/a/run/checkpoints"  # the input is left as it was


def test_length_bucket_order_follows_set_epoch_after_iter() -> None:
    """Lightning creates the train iterator before ``set_epoch`` on resume: the shuffle must follow the epoch."""
    from ner_app.train.sampler import LengthBucketSampler

    sampler = LengthBucketSampler([3, 1, 4, 1, 5, 9, 2, 6], batch_size=2, shuffle=True, seed=3)
    expected = {epoch: (sampler.set_epoch(epoch), sampler.batches())[1] for epoch in range(4)}
    sampler.set_epoch(0)
    iterator = iter(sampler)
    sampler.set_epoch(3)
    assert list(iterator) == expected[3] != expected[0]


@pytest.mark.parametrize("stop", [4, 9])
def test_pretrain_resume_is_exact(tmp_path: Path, stop: int) -> None:
    """Dropout and the sampled softmax draw random numbers: their streams must continue across --resume."""
    corpus = write_grammar(tmp_path / "train.txt", 120, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 10, seed=1)
    config = ["pretrain-bilm", "--config", str(ROOT / "configs" / "bilm_tiny.yaml"), "--threads", "1"]
    results = []
    for name, stops in (("whole", [12]), ("parts", [stop, 12])):
        overrides = tiny_overrides(tmp_path / name, corpus, [heldout], steps=12)
        overrides += ["model.dropout=0.2", "train.val_every_n_steps=3"]
        for i, steps in enumerate(stops):
            resume = ["--resume"] if i else []
            assert main([*config, *resume, *overrides, f"train.max_steps={steps}"]) == 0
        run = tmp_path / name / "run"
        results.append((final_state(run), PretrainMetrics.read(run / "metrics.json").heldout))
    assert_same_weights(results[0][0], results[1][0])
    assert results[0][1] == results[1][1]


def test_only_rank_zero_trims_the_csv_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under DDP every process builds the logger; only rank 0 may rewrite metrics.csv on --resume (two
    processes replacing it through one temp file raced: "No such file or directory: metrics.csv.tmp")."""
    from lightning_fabric.utilities.rank_zero import rank_zero_only
    from pytorch_lightning.loggers.csv_logs import ExperimentWriter

    from ner_app.runtime.run_dir import ResumableCSVLogger

    log = tmp_path / "logs" / "metrics.csv"
    log.parent.mkdir()
    log.write_text("epoch,step,loss\n0,1,0.5\n0,5,0.4\n")
    monkeypatch.setattr(rank_zero_only, "rank", 1, raising=False)
    ResumableCSVLogger(tmp_path, "logs", keep_below=3).experiment.log_metrics({"loss": 0.3}, 3)
    assert log.read_text() == "epoch,step,loss\n0,1,0.5\n0,5,0.4\n"  # untouched by rank 1
    monkeypatch.setattr(rank_zero_only, "rank", 0)
    assert isinstance(ResumableCSVLogger(tmp_path, "logs", keep_below=3).experiment, ExperimentWriter)
    assert log.read_text().splitlines() == [
        "epoch,step,loss",
        "0,1,0.5",
    ]  # rank 0 keeps the rows before step 3


def test_movable_checkpoint_files_its_state_as_model_checkpoint() -> None:
    """Checkpoints written by Lightning's own ModelCheckpoint (before this class) keep their best score."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    from ner_app.runtime.moved_checkpoint import MovableCheckpoint

    kwargs = {"dirpath": "/tmp/run/checkpoints", "filename": "best", "monitor": "val_f1", "mode": "max"}
    assert MovableCheckpoint(**kwargs).state_key == ModelCheckpoint(**kwargs).state_key
