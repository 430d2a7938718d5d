"""The run folder: checkpoints appear whole or not at all, and what a killed run left half-written is swept."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch

import train
from ner_app.runtime import checkpoint as checkpoint_module
from ner_app.runtime.checkpoint import SafeCheckpointIO
from ner_app.runtime.run_dir import claimed_run_folder, sweep_temporary_files

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkpoint_cut_short_by_a_full_disk_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "checkpoints" / "best.ckpt"
    SafeCheckpointIO().save_checkpoint({"step": 1}, path)
    before = path.read_bytes()

    def half_then_full(self: Path, data) -> int:
        with open(self, "wb") as f:
            f.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(checkpoint_module.Path, "write_bytes", half_then_full)
    with pytest.raises(OSError) as err:
        SafeCheckpointIO().save_checkpoint({"step": 2}, path)
    assert Path(err.value.filename).parent == path.parent  # the error names a file of the run folder
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == ["best.ckpt"]
    assert torch.load(path, weights_only=True) == {"step": 1}


def test_what_a_killed_run_left_is_swept_and_nothing_else(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    stale = [
        run / ".export.k2j.tmp",
        run / ".report.html.x1.tmp",
        run / "checkpoints" / ".last.ckpt.ab.tmp",
        run / "checkpoints" / "last.ckpt.tmp",
        run / ".export.old-4242",
    ]
    for path in stale:
        path.mkdir() if "export" in path.name else path.write_bytes(b"x")
    kept = [run / "notes.tmp", run / "checkpoints" / "last.ckpt", run / ".hidden-notes"]
    for path in kept:
        path.write_bytes(b"keep")
    assert sorted(sweep_temporary_files(run)) == sorted(stale)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stale)


def test_a_fresh_run_starts_in_a_folder_holding_only_a_killed_runs_leftovers(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / ".export.abc.tmp").mkdir()  # kill -9 during the end-of-run export of a run with no checkpoint yet
    with claimed_run_folder(run, resume=False):
        assert not (run / ".export.abc.tmp").exists()
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        "elmo.cache_dir=null",
        f"data.dir={ROOT / 'tests/data/tiny_conll'}",
        f"elmo.options={ROOT / 'tests/data/tiny_bilm/options.json'}",
        f"elmo.weights={ROOT / 'tests/data/tiny_bilm/weights.hdf5'}",
        "trainer.max_epochs=1",
        "trainer.threads=1",
    ]
    assert train.main(args) == 0
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.endswith(".tmp")]
