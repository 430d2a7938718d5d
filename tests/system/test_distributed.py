"""The tagger under Lightning's DDP on CPU: 2 gloo processes, as ``trainer.devices=2 trainer.strategy=ddp``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.system  # starts training processes: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


@pytest.mark.slow
def test_two_cpu_processes_reach_f1_100_and_write_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # Lightning starts rank 1 by running this same command again: a real script, not pytest, must be argv.
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        f"data.dir={TINY}",
        f"elmo.options={ROOT / 'tests/data/tiny_bilm/options.json'}",
        f"elmo.weights={ROOT / 'tests/data/tiny_bilm/weights.hdf5'}",
        f"elmo.cache_dir={tmp_path / 'cache'}",
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.strategy=ddp",
        "trainer.threads=1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Starting with 2 processes" in result.stderr + result.stdout
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    assert result.stdout.count("dev F1 100.00  test F1 100.00") == 1  # rank 0 alone reports
    assert result.stdout.count("Test set (") == 1
    assert sorted(p.name for p in run.rglob("metrics.json")) == ["metrics.json"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    # the cache was filled once (by local rank 0) and read by both ranks
    assert result.stderr.count("ELMo layer cache") + result.stdout.count("ELMo layer cache") == 1
