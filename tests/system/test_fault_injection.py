"""Fault injection (docs/reliability.md): a real ``kill -9`` of a training, a pretraining and a cache fill at
several points, then ``--resume`` (or a plain rerun where no checkpoint was written yet) must reach exactly
the result of the uninterrupted run; a ``SIGTERM`` must stop a run with exit code 143. Subprocesses at tiny
scale; marked slow, run by ``.ci/run``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ner_app.pretrain.metrics import PretrainMetrics
from tests.helpers import tiny_overrides, write_grammar

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
TINY_BILM = ROOT / "tests" / "data" / "tiny_bilm"


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ner_app", *args]


def run(args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def checkpoint_writes(path: Path) -> Callable[[], int]:
    """A counter of the distinct files that have been ``path`` (each atomic write is a new file; inode numbers
    are reused, so the modification time tells them apart)."""
    seen: set[tuple[int, int]] = set()

    def count() -> int:
        try:
            stat = path.stat()
            seen.add((stat.st_ino, stat.st_mtime_ns))
        except FileNotFoundError:
            pass
        return len(seen)

    return count


def signal_when(
    args: list[str], ready: Callable[[], bool], signum: int, delay: float = 0.0
) -> tuple[int, str]:
    """Start ``args``, send ``signum`` as soon as ``ready()`` holds (plus ``delay``); its exit code and stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        args,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A shell starts background jobs with SIGINT ignored, and an ignored SIGINT stays ignored in Python:
        # give the child the default disposition, as a command typed at a terminal has.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 240
    while not ready():
        assert process.poll() is None, f"finished before the signal: {process.stderr.read()[-2000:]!r}"
        assert time.monotonic() < deadline, "signal point never reached"
        time.sleep(0.002)
    time.sleep(delay)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


def kill_when(args: list[str], ready: Callable[[], bool], delay: float = 0.0) -> None:
    """Start ``args``, SIGKILL it as soon as ``ready()`` holds (plus ``delay``); it must not have finished."""
    code, _ = signal_when(args, ready, signal.SIGKILL, delay)
    assert code == -signal.SIGKILL, "the run finished before the kill"


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)[
        "state_dict"
    ]


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name, tensor in a.items():
        torch.testing.assert_close(b[name], tensor, atol=0, rtol=0, msg=name)


def train_args(run_dir: Path, cache: Path | None, data: Path = TINY, epochs: int = 20) -> list[str]:
    return [
        "train",
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run_dir}",
        f"data.dir={data}",
        f"elmo.options={TINY_BILM / 'options.json'}",
        f"elmo.weights={TINY_BILM / 'weights.hdf5'}",
        f"elmo.cache_dir={cache or 'null'}",
        f"trainer.max_epochs={epochs}",
        "trainer.patience=100",
        "trainer.threads=1",
        "model.dropout=0.3",
    ]


@pytest.mark.parametrize(("writes", "cached"), [(2, False), (5, True)])
def test_killed_training_resumes_to_the_same_result(tmp_path: Path, writes: int, cached: bool) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    cache = tmp_path / "cache" if cached else None
    run(command(*train_args(whole, cache)))
    args = command(*train_args(killed, cache))
    count = checkpoint_writes(killed / "checkpoints" / "last.ckpt")
    kill_when(args, lambda: count() >= writes)
    run([*args, "--resume"])
    assert_same(final_weights(whole), final_weights(killed))
    scores = [json.loads((r / "metrics.json").read_text()) for r in (whole, killed)]
    for split in ("dev", "test"):
        assert {k: v for k, v in scores[0][split].items() if k != "sentences_per_s"} == {
            k: v for k, v in scores[1][split].items() if k != "sentences_per_s"
        }


@pytest.mark.parametrize("job", ["train", "pretrain-bilm"])
def test_sigterm_stops_a_run_with_exit_code_143(tmp_path: Path, job: str) -> None:
    """Lightning ends a run on SIGTERM with ``SystemExit(0)``: the command must not look finished to a job queue."""
    if job == "train":
        run_dir = tmp_path / "run"
        args = command(*train_args(run_dir, None))
    else:
        corpus = write_grammar(tmp_path / "train.txt", 400, seed=0)
        heldout = write_grammar(tmp_path / "heldout.txt", 10, seed=1)
        run_dir = tmp_path / "bilm" / "run"
        args = command(
            "pretrain-bilm",
            "--config",
            str(ROOT / "configs" / "bilm_tiny.yaml"),
            "--threads",
            "1",
            *tiny_overrides(tmp_path / "bilm", corpus, [heldout], steps=200),
            "train.val_every_n_steps=4",
        )
    last = run_dir / "checkpoints" / "last.ckpt"
    count = checkpoint_writes(last)
    code, stderr = signal_when(args, lambda: count() >= 2, signal.SIGTERM)
    assert code == 143, stderr[-2000:]
    assert stderr.splitlines()[-1] == (
        f"stopped by SIGTERM before the run finished; the same command with --resume continues from {last}"
    )
    assert not (run_dir / "metrics.json").exists()
    run([*args, "--resume"])
    if job == "train":
        assert json.loads((run_dir / "metrics.json").read_text())
    else:
        assert PretrainMetrics.read(run_dir / "metrics.json").steps == 200


@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [
        (
            signal.SIGTERM,
            143,
            "stopped by SIGTERM before the command finished; files it was writing were removed",
        ),
        (
            signal.SIGINT,
            130,
            "interrupted by Ctrl-C before the command finished; files it was writing were removed",
        ),
    ],
)
def test_a_signal_stops_embed_without_leftovers(tmp_path: Path, signum: int, code: int, line: str) -> None:
    """Without a handler, SIGTERM ended the process on the spot and the atomic write's temporary file stayed;
    Ctrl-C printed a traceback."""
    source, out = tmp_path / "input.txt", tmp_path / "out" / "layers.hdf5"
    source.write_text("".join(f"w{i} x{i % 7} y z{i % 13} , and more words here .\n" for i in range(40000)))
    args = command(
        "embed",
        "--options",
        str(TINY_BILM / "options.json"),
        "--weights",
        str(TINY_BILM / "weights.hdf5"),
        "--input",
        str(source),
        "--output",
        str(out),
        "--threads",
        "1",
    )
    writing = lambda: out.parent.is_dir() and any(out.parent.iterdir())  # noqa: E731 (the temporary file exists)
    returned, stderr = signal_when(args, writing, signum)
    assert returned == code, stderr[-2000:]
    assert stderr.splitlines()[-1] == line
    assert "Traceback" not in stderr
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize("writes", [1, 3])
def test_killed_pretraining_resumes_to_the_same_result(tmp_path: Path, writes: int) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 400, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 10, seed=1)
    config = ["pretrain-bilm", "--config", str(ROOT / "configs" / "bilm_tiny.yaml"), "--threads", "1"]
    results = []
    for name in ("whole", "killed"):
        overrides = [
            *tiny_overrides(tmp_path / name, corpus, [heldout], steps=40),
            "model.dropout=0.2",
            "train.val_every_n_steps=4",
        ]
        args = command(*config, *overrides)
        if name == "killed":
            last = tmp_path / name / "run" / "checkpoints" / "last.ckpt"
            count = checkpoint_writes(last)
            kill_when(args, lambda count=count: count() >= writes)
            args = [*args, "--resume"]
        run(args)
        out = tmp_path / name / "run"
        results.append((final_weights(out), PretrainMetrics.read(out / "metrics.json")))
    assert_same(results[0][0], results[1][0])
    assert results[0][1].heldout == results[1][1].heldout
    assert results[0][1].steps == results[1][1].steps == 40


@pytest.mark.parametrize("delay", [0.0, 0.4])
def test_killed_cache_fill_reruns_to_the_same_result(tmp_path: Path, delay: float) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "valid", "test"):  # enough distinct sentences that the fill takes a while
        sentences = [
            "".join(f"{split}{k}w{i} {'B-PER' if i == 0 else 'O'}\n" for i in range(40)) for k in range(600)
        ]
        (data / f"{split}.txt").write_text("\n".join(sentences))
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    run(command(*train_args(whole, tmp_path / "cache_whole", data, epochs=2)))
    args = command(*train_args(killed, tmp_path / "cache_killed", data, epochs=2))
    kill_when(
        args,
        lambda: (tmp_path / "cache_killed").is_dir() and any((tmp_path / "cache_killed").iterdir()),
        delay,
    )
    assert not (killed / "checkpoints" / "last.ckpt").exists()  # killed before training: a plain rerun
    run(args)
    assert_same(final_weights(whole), final_weights(killed))
