"""Learning-rate schedules and gradient accumulation in real tiny runs: the lr each step used is in the log."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

import train

pytestmark = pytest.mark.system  # trains tiny runs: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
TINY_BILM = ROOT / "tests" / "data" / "tiny_bilm"


def run(run_dir: Path, *overrides: str) -> list[dict[str, str]]:
    """Train configs/tiny.yaml (3 batches an epoch, lr 0.01) into ``run_dir``; the rows of its metrics.csv."""
    args = [
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={run_dir}",
        f"data.dir={TINY}",
        f"elmo.options={TINY_BILM / 'options.json'}",
        f"elmo.weights={TINY_BILM / 'weights.hdf5'}",
        "elmo.cache_dir=null",
        "trainer.threads=1",
        *overrides,
    ]
    assert train.main(args) == 0
    with open(run_dir / "logs" / "metrics.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_linear_schedule_warms_up_then_decays_to_zero(tmp_path: Path) -> None:
    # 4 epochs of 3 batches: 12 optimiser steps, the first quarter (3) warming up
    rows = run(
        tmp_path / "run", "optim.schedule=linear", "optim.warmup_fraction=0.25", "trainer.max_epochs=4"
    )
    lrs = [float(r["lr"]) for r in rows if r.get("lr")]
    expected = [0.01 * k / 4 for k in (1, 2, 3, 4)] + [0.01 * k / 9 for k in range(8, 0, -1)]
    assert lrs == pytest.approx(expected, rel=1e-6)
    assert (tmp_path / "run" / "report.html").is_file()  # the run report reads the log with its lr column


def test_plateau_schedule_lowers_lr_when_dev_f1_stalls(tmp_path: Path) -> None:
    rows = run(
        tmp_path / "run",
        "optim.schedule=plateau",
        "optim.plateau_patience=0",
        "optim.plateau_factor=0.5",
        "trainer.max_epochs=3",
    )
    f1 = [float(r["val_f1"]) for r in rows if r.get("val_f1")]
    lr_of_epoch = {int(r["epoch"]): float(r["lr"]) for r in rows if r.get("lr")}
    assert f1[:2] == [0.0, 0.0]  # configs/tiny.yaml: no entity found after epochs 1 and 2
    # epoch 1 sets the best; epoch 2 does not beat it: with patience 0 the lr halves for epoch 3
    assert lr_of_epoch == pytest.approx({0: 0.01, 1: 0.01, 2: 0.005})


def test_no_schedule_logs_no_lr_and_keeps_the_lr(tmp_path: Path) -> None:
    rows = run(tmp_path / "run", "trainer.max_epochs=1")
    assert "lr" not in rows[0]  # the log's columns are what they were before schedules existed
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["optimizer_states"][0]["param_groups"][0]["lr"] == 0.01 and not last["lr_schedulers"]


def test_accumulated_batches_make_one_optimiser_step(tmp_path: Path) -> None:
    rows = run(
        tmp_path / "run",
        "trainer.accumulate_grad_batches=3",
        "trainer.max_epochs=2",
        "optim.schedule=linear",
        "optim.warmup_fraction=0",
    )
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 2  # 2 epochs of 3 batches, one step each
    # the linear schedule counts optimiser steps, not batches: 2 steps from lr down to 0
    assert sorted({float(r["lr"]) for r in rows if r.get("lr")}, reverse=True) == pytest.approx([0.01, 0.005])
