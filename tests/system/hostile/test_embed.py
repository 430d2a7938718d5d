"""Hostile and careless input to embed: threads, a full disk, a kill -9: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
import torch

from ner_app.cli.commands import main
from tests.helpers import ROOT, TINY_BILM, one_error_line


def test_embed_threads_option(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("The EU rejects it .\nPeter\n", encoding="utf-8")
    args = [
        "embed",
        "--options",
        str(TINY_BILM / "options.json"),
        "--weights",
        str(TINY_BILM / "weights.hdf5"),
        "--input",
        str(tmp_path / "in.txt"),
        "--output",
        str(tmp_path / "out.hdf5"),
    ]
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
    args = [
        "embed",
        "--options",
        str(TINY_BILM / "options.json"),
        "--weights",
        str(TINY_BILM / "weights.hdf5"),
        "--input",
        str(text),
        "--output",
        str(small_disk / "layers.hdf5"),
        *(["--outputs", "all"] if layout == "outputs" else []),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write (needs about" in err[0] and "MB free on its disk" in err[0]
    assert list(small_disk.iterdir()) == []
    (text).write_text("a b\\n")  # a small output fits: the check refuses only what cannot fit
    assert main([*args[:6], str(text), *args[7:]]) == 0 and (small_disk / "layers.hdf5").is_file()


@pytest.mark.system
@pytest.mark.slow
def test_a_killed_embed_leaves_a_temporary_file_that_the_next_run_sweeps(tmp_path: Path, monkeypatch) -> None:
    """kill -9 during the hdf5 write leaves ``.layers.hdf5.*.tmp``; the next write of the same file removes it
    (once untouched for ``STALE_AFTER_S``; a live writer keeps its file fresh) and writes the whole output."""
    from ner_app import files

    text = tmp_path / "in.txt"
    text.write_text("".join(f"w{i} x{i % 97} y z {i} .\n" for i in range(20_000)))
    out = tmp_path / "out" / "layers.hdf5"
    args = [
        "embed",
        "--options",
        str(TINY_BILM / "options.json"),
        "--weights",
        str(TINY_BILM / "weights.hdf5"),
        "--input",
        str(text),
        "--output",
        str(out),
        "--threads",
        "1",
    ]
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
    assert sorted(p.name for p in out.parent.iterdir()) == [
        ".layers.hdf5.ner-app",
        "layers.hdf5",
    ]  # and its marker
    with h5py.File(out, "r") as f:
        assert len(f) == 20_000


def _embed(tmp_path: Path, output: Path | str) -> list[str]:
    (tmp_path / "in.txt").write_text("The EU rejects it .\nPeter\n", encoding="utf-8")
    return [
        "embed",
        "--options",
        str(TINY_BILM / "options.json"),
        "--weights",
        str(TINY_BILM / "weights.hdf5"),
        "--input",
        str(tmp_path / "in.txt"),
        "--output",
        str(output),
    ]


def test_embed_writes_through_a_character_device_and_never_replaces_it(
    tmp_path: Path, devices: dict[str, Path], capsys
) -> None:
    assert main(_embed(tmp_path, devices["null"])) == 0
    assert stat.S_ISCHR(devices["null"].lstat().st_mode)
    assert main(_embed(tmp_path, devices["full"])) == 2
    one_error_line(capsys, str(devices["full"]), "No space left on device")
    assert stat.S_ISCHR(devices["full"].lstat().st_mode)
    assert sorted(p.name for p in devices["null"].parent.iterdir()) == ["full", "null"]


def test_embed_into_a_fifo_reaches_its_reader(tmp_path: Path, fifo: Path, fifo_reader) -> None:
    reader = fifo_reader(fifo)
    assert main(_embed(tmp_path, fifo)) == 0
    data = reader.bytes()
    with h5py.File(io.BytesIO(data), "r") as out:  # the whole hdf5 file came through the FIFO
        assert sorted(out.keys()) == ["0", "1"] and out["0"].shape[1] == 5
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_embed_into_a_fifo_without_a_reader_is_one_line(tmp_path: Path, fifo: Path, unblock, capsys) -> None:
    unblock(fifo, 60)  # on a blocking open, the test fails after a minute instead of hanging
    assert main(_embed(tmp_path, fifo)) == 2
    one_error_line(capsys, f"{fifo}: a FIFO that no process is reading")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and sorted(p.name for p in tmp_path.iterdir()) == [
        "fifo",
        "in.txt",
    ]


def test_embed_output_dash_is_standard_output(tmp_path: Path, capsysbinary) -> None:
    assert main(_embed(tmp_path, "-")) == 0
    out, err = capsysbinary.readouterr()
    with h5py.File(io.BytesIO(out), "r") as hdf5:
        assert sorted(hdf5.keys()) == ["0", "1"]
    assert b"wrote 2 sentences to standard output" in err
    assert not (tmp_path / "-").exists()
    link = tmp_path / "out.hdf5"
    link.symlink_to("/dev/stdout")  # written through, and the link stays
    assert main(_embed(tmp_path, link)) == 0
    assert capsysbinary.readouterr().out.startswith(b"\x89HDF") and link.is_symlink()


def test_embed_output_that_is_a_folder_is_refused_before_the_work(tmp_path: Path, capsys) -> None:
    assert main(_embed(tmp_path, tmp_path)) == 2
    one_error_line(capsys, f"--output {tmp_path}: is a folder, expected a file name")


def test_embed_output_never_replaces_a_file_it_did_not_write(tmp_path: Path, capsys) -> None:
    out = tmp_path / "vectors.hdf5"
    out.write_bytes(b"\x89HDF\r\n\x1a\n another tool's vectors")
    assert main(_embed(tmp_path, out)) == 2
    assert one_error_line(capsys) == (
        f"error: --output {out}: exists and is not an earlier output of embed (or was changed since); nothing "
        "was changed: choose another name, or add --overwrite to replace it"
    )
    assert out.read_bytes() == b"\x89HDF\r\n\x1a\n another tool's vectors"
    assert main([*_embed(tmp_path, out), "--overwrite"]) == 0
    assert main(_embed(tmp_path, out)) == 0  # its own earlier output
