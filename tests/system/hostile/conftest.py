"""Fixtures of the hostile-input modules: one tiny trained run, and a real small filesystem."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import train
from tests.helpers import train_args


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("hostile") / "run"
    assert train.main(train_args(run)) == 0
    return run


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
