"""Hostile and careless input to embed: threads, a full disk, a kill -9: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
import torch

from ner_app.cli.commands import main
from tests.helpers import (
    ROOT,
    TINY_BILM,
)


def test_embed_threads_option(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("The EU rejects it .\nPeter\n", encoding="utf-8")
    args = ["embed", "--options", str(TINY_BILM / "options.json"), "--weights", str(TINY_BILM / "weights.hdf5"),
            "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.hdf5")]  # fmt: skip
    assert main([*args, "--threads", "1"]) == 0
    assert torch.get_num_threads() == 1  # conftest restores the count after the test
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert sorted(out.keys()) == ["0", "1"]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--threads", "0"])
    assert exit_.value.code == 2
    assert "argument --threads: expected an integer >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("layout", ["layers", "outputs"])
def test_embed_onto_a_full_disk_is_one_line_and_leaves_nothing(
    small_disk: Path, tmp_path: Path, capsys, layout
):
    """HDF5 on a full disk floods stderr and crashed the process; embed measures the disk first."""
    text = tmp_path / "in.txt"
    text.write_text("".join(f"w{i} x{i} y z {i} .\\n" for i in range(300)))
    args = ["embed", "--options", str(TINY_BILM / "options.json"), "--weights", str(TINY_BILM / "weights.hdf5"),
            "--input", str(text), "--output", str(small_disk / "layers.hdf5"),
            *(["--outputs", "all"] if layout == "outputs" else [])]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write (needs about" in err[0] and "MB free on its disk" in err[0]
    assert list(small_disk.iterdir()) == []
    (text).write_text("a b\\n")  # a small output fits: the check refuses only what cannot fit
    assert main([*args[:6], str(text), *args[7:]]) == 0 and (small_disk / "layers.hdf5").is_file()


def test_a_killed_embed_leaves_a_temporary_file_that_the_next_run_sweeps(tmp_path: Path, monkeypatch) -> None:
    """kill -9 during the hdf5 write leaves ``.layers.hdf5.*.tmp``; the next write of the same file removes it
    (once untouched for ``STALE_AFTER_S``; a live writer keeps its file fresh) and writes the whole output."""
    from ner_app import files

    text = tmp_path / "in.txt"
    text.write_text("".join(f"w{i} x{i % 97} y z {i} .\n" for i in range(20_000)))
    out = tmp_path / "out" / "layers.hdf5"
    args = ["embed", "--options", str(TINY_BILM / "options.json"), "--weights", str(TINY_BILM / "weights.hdf5"),
            "--input", str(text), "--output", str(out), "--threads", "1"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "ner_app", *args], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.parent.glob(".layers.hdf5.*.tmp")):
        time.sleep(0.05)
    time.sleep(0.3)  # inside the write
    process.kill()
    process.wait()
    left = list(out.parent.glob(".layers.hdf5.*.tmp"))
    assert left and not out.exists()
    monkeypatch.setattr(files, "STALE_AFTER_S", 0.0)
    assert main(args) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["layers.hdf5"]
    with h5py.File(out, "r") as f:
        assert len(f) == 20_000
