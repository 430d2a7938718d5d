"""Fixtures of the hostile-input modules: one tiny trained run (trained once a session), a real small filesystem,
and special files (character devices made with mknod and FIFOs, all inside the test's temporary folder, never the
machine's /dev)."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import train
from tests.helpers import train_args


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny run trained once for every hostile module (no test changes it: those that damage a run copy it)."""
    run = tmp_path_factory.mktemp("hostile") / "run"
    assert train.main(train_args(run)) == 0
    return run


@pytest.fixture(scope="session")
def onnx_folder(trained: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny run's export as an fp32 ONNX folder (``export --onnx``), made once; tests that damage it copy it."""
    from ner_app.onnx.export import export_onnx_from

    return export_onnx_from(trained / "export", tmp_path_factory.mktemp("hostile_onnx") / "onnx")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB filesystem (tmpfs), where the machine lets this process mount one; skipped otherwise."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a small filesystem here ({done.stderr.decode(errors='replace').strip()[:80]})"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)  # lazy: files the run left open


@pytest.fixture
def devices(tmp_path: Path) -> dict[str, Path]:
    """Character devices made with mknod inside ``tmp_path`` (never the machine's own /dev): ``null`` (1, 3)
    swallows what is written, ``full`` (1, 7) answers every write with ENOSPC, as /dev/null and /dev/full do."""
    folder = tmp_path / "dev"
    folder.mkdir()
    made = {}
    for name, minor in (("null", 3), ("full", 7)):
        try:
            os.mknod(folder / name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        except PermissionError:
            pytest.skip("mknod needs root here")
        made[name] = folder / name
    return made


class FifoReader:
    """A thread that reads a FIFO to its end; ``bytes()`` joins it. A watchdog opens the FIFO's other end
    after ``timeout`` seconds so that a writer stuck in open() is released and the test fails, never hangs."""

    def __init__(self, fifo: Path) -> None:
        self.data = b""
        self.thread = threading.Thread(target=self._read, args=(fifo,), daemon=True)
        self.thread.start()

    def _read(self, fifo: Path) -> None:
        with open(fifo, "rb") as f:
            self.data = f.read()

    def bytes(self, timeout: float = 60) -> bytes:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the FIFO's reader never saw its writer close it"
        return self.data


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO in ``tmp_path``; after the test a watchdog writer/reader releases any end left waiting."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    yield path
    for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
        try:
            os.close(os.open(path, flags))
        except OSError:
            pass


def unblock_after(fifo: Path, seconds: float) -> threading.Timer:
    """Open ``fifo`` for reading and writing after ``seconds``: whoever waits on it is released (the test then
    fails on its assertions instead of hanging). Cancel it when the command returned."""

    def release() -> None:
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        threading.Timer(5, os.close, args=(fd,)).start()

    timer = threading.Timer(seconds, release)
    timer.daemon = True
    timer.start()
    return timer


@pytest.fixture
def fifo_reader() -> type[FifoReader]:
    """``fifo_reader(path)`` starts a thread reading the FIFO ``path`` to its end."""
    return FifoReader


@pytest.fixture
def unblock() -> Iterator[Callable[[Path, float], threading.Timer]]:
    """``unblock(fifo, seconds)``: see ``unblock_after``; every timer is cancelled after the test."""
    timers: list[threading.Timer] = []

    def start(path: Path, seconds: float) -> threading.Timer:
        timers.append(unblock_after(path, seconds))
        return timers[-1]

    yield start
    for timer in timers:
        timer.cancel()
