"""``train --seeds``: one run per seed in output_dir/seedN, then the compare table; run again, a finished seed is
skipped and an interrupted one continues (docs/configuration.md#several-seeds)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import train
from ner_app.cli.commands import main
from ner_app.jobs.seeds import SeedsError, _CacheGate, parse_seeds
from ner_app.train.layer_store import LayerStore
from tests.helpers import one_error_line, train_args

pytestmark = pytest.mark.system  # trains tiny runs over several seeds: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]


def compare_output(capsys: pytest.CaptureFixture[str], *folders: Path) -> str:
    """What ``python -m ner_app compare FOLDERS`` prints."""
    assert main(["compare", *map(str, folders)]) == 0
    return capsys.readouterr().out


def test_seed_specs() -> None:
    assert parse_seeds("1-5") == [1, 2, 3, 4, 5]
    assert parse_seeds("1,3,5") == [1, 3, 5]
    assert parse_seeds(" 7, 1-3 ") == [7, 1, 2, 3]
    assert parse_seeds("0") == [0]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "expected seeds such as 1-5, 1,3,5 or 1-3,7, found ''"),
        ("1-", "found '1-'"),
        ("a", "found 'a'"),
        ("-3", "found '-3'"),
        ("1,,2", "found ''"),
        ("1.5", "found '1.5'"),
        ("5-1", "the range 5-1 runs backwards (write 1-5)"),
        ("1-3,2", "seed 2 is named twice"),
        ("1-100000", "expected at most 1000 seeds"),
        ("4294967296", "each at most 4294967295"),
    ],
)
def test_bad_seed_specs_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    with pytest.raises(SeedsError):
        parse_seeds(spec)
    assert train.main([*train_args(tmp_path / "run"), "--seeds", spec]) == 2
    one_error_line(capsys, f"--seeds {spec!r}: ", message)
    assert not (tmp_path / "run").exists()


def test_a_huge_seed_spec_is_named_not_pasted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        train.main([*train_args(tmp_path / "run"), "--seeds", "9" * 5000]) == 2
    )  # int() refuses 4,300 digits
    line = one_error_line(capsys, "--seeds '9999", "...': expected seeds such as 1-5")
    assert len(line) < 200


def test_parallel_needs_seeds_and_one_process_per_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert train.main([*train_args(tmp_path / "run"), "--parallel", "2"]) == 2
    one_error_line(capsys, "--parallel N goes with --seeds")
    assert train.main([*train_args(tmp_path / "run"), "--seeds", "1-2", "trainer.devices=2"]) == 2
    one_error_line(capsys, "each seed runs in one process", "trainer.devices x trainer.num_nodes = 2")
    assert not (tmp_path / "run").exists()


def test_seeds_skip_finished_continue_interrupted_and_print_the_compare_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    # Seed 2 was stopped after its first epoch: its folder holds a checkpoint and no metrics.json.
    assert train.main(train_args(out / "seed2", "seed=2", "trainer.max_epochs=1")) == 0
    (out / "seed2" / "metrics.json").unlink()
    capsys.readouterr()
    assert train.main([*train_args(out), "--seeds", "1-2"]) == 0  # 2 epochs each
    printed = capsys.readouterr().out
    assert f"seed 1 (1/2): training in {out / 'seed1'}" in printed
    assert f"seed 2 (2/2): continuing from checkpoints/last.ckpt in {out / 'seed2'}" in printed
    with open(out / "seed2" / "logs" / "metrics.csv", newline="", encoding="utf-8") as f:
        epochs = [row["epoch"] for row in csv.DictReader(f) if row.get("train_loss")]
    assert epochs == ["0"] * 3 + ["1"] * 3  # the first epoch's rows from before the stop, the second's after
    for seed in (1, 2):
        saved = json.loads((out / f"seed{seed}" / "metrics.json").read_text())
        assert set(saved) >= {"dev", "test"} and (out / f"seed{seed}" / "report.html").is_file()
    table = compare_output(capsys, out / "seed1", out / "seed2")
    assert printed.endswith(table) and "| 1, 2 " in table  # the compare command's own output, last
    # Run again: nothing is trained, the same table is printed.
    stamps = [(out / f"seed{s}" / "metrics.json").stat().st_mtime_ns for s in (1, 2)]
    assert train.main([*train_args(out), "--seeds", "1-2"]) == 0
    again = capsys.readouterr().out
    assert "(1/2): finished earlier, skipped" in again and "(2/2): finished earlier, skipped" in again
    assert again.endswith(table) and "Dev set" not in again
    assert stamps == [(out / f"seed{s}" / "metrics.json").stat().st_mtime_ns for s in (1, 2)]
    # A finished seed of another config does not stand in for this one.
    assert main(["train", *train_args(out, "optim.lr=0.5"), "--seeds", "1"]) == 2
    one_error_line(capsys, f"{out / 'seed1'}: holds a finished run of another config (optim.lr: 0.01 -> 0.5)")


def test_the_parallel_gate_opens_on_a_published_manifest_not_on_a_log_line(tmp_path: Path) -> None:
    """The seeds after the first wait until the first seed's fill published a cache generation (one that adds
    nothing included), or until the first seed ended; without a cache to fill they never wait."""
    assert _CacheGate(None).is_open()
    cache = tmp_path / "cache"
    LayerStore(cache, "a" * 64, 2, 4).publish()  # a cache from an earlier sweep
    gate = _CacheGate(str(cache))
    assert gate.is_open()  # no seed started yet: the first may go
    first = type("Child", (), {"ended": False})()
    gate.first = first  # type: ignore[assignment]
    assert not gate.is_open()
    LayerStore(cache, "a" * 64, 2, 4).publish()  # the first seed's fill, with nothing to add
    assert gate.is_open()
    late = _CacheGate(str(cache))
    late.first = type("Child", (), {"ended": False})()  # type: ignore[assignment]
    assert not late.is_open()
    LayerStore(cache, "b" * 64, 2, 4).publish()  # a fresh cache of another biLM
    assert late.is_open()
    ended = _CacheGate(str(cache))
    ended.first = type("Child", (), {"ended": True})()  # type: ignore[assignment]
    assert ended.is_open()  # a first seed that failed before its fill opens the gate too


@pytest.mark.slow
def test_parallel_seeds_match_the_seeds_run_in_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two seeds at a time in child processes (one thread each): the same scores as one after another, each
    child's lines shown with its seed in front, and the compare table last."""
    in_turn, parallel = tmp_path / "in_turn", tmp_path / "parallel"
    cache = f"elmo.cache_dir={tmp_path / 'cache'}"  # a fresh cache: the first seed fills it alone
    assert train.main([*train_args(in_turn), "--seeds", "1-2"]) == 0
    capsys.readouterr()
    command = [
        sys.executable,
        "-m",
        "ner_app",
        "train",
        *train_args(parallel, cache),
        "--seeds",
        "1-2",
        "--parallel",
        "2",
    ]
    result = subprocess.run(
        command,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for seed in (1, 2):
        scores = [
            json.loads((run / f"seed{seed}" / "metrics.json").read_text()) for run in (in_turn, parallel)
        ]
        for split in ("dev", "test"):
            assert scores[0][split]["f1"] == scores[1][split]["f1"]
        assert f"seed{seed}| dev F1 " in result.stdout and f"seed{seed}| report: " in result.stdout
    fills = [line for line in result.stderr.splitlines() if "ELMo layer cache" in line]
    assert len(fills) == 2 and sum(" 0 sentences computed" in line for line in fills) == 1, fills
    assert result.stdout.endswith(compare_output(capsys, parallel / "seed1", parallel / "seed2"))
