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


def test_the_lock_file_goes_on_every_exit_and_a_removed_one_is_never_shared(tmp_path: Path) -> None:
    import fcntl
    import os

    from ner_app.runtime.run_dir import RunFolderError, locked_run_folder

    run = tmp_path / "run"
    with locked_run_folder(run):
        assert (run / ".lock").is_file()
        with pytest.raises(RunFolderError, match="another run is using this output_dir"):
            with locked_run_folder(run):
                pass
        assert (run / ".lock").is_file()  # a refused second run leaves the holder's lock alone
    assert not run.exists()  # the folder it made, empty again: removed
    run.mkdir()
    (run / "notes.txt").write_text("the user's")
    with pytest.raises(ValueError), locked_run_folder(run):
        raise ValueError("refused")
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
    # a process that opened the lock file just before its holder removed it takes the new file instead
    stale = open(run / ".lock", "a+b")  # noqa: SIM115
    os.unlink(run / ".lock")
    fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # holds the removed file's lock
    with locked_run_folder(run):
        assert (run / ".lock").is_file()
    stale.close()
