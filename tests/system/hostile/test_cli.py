"""Hostile and careless input to arguments every command shares: devices, run folders: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ner_app.cli.commands import main
from tests.helpers import (
    ROOT,
)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("command", ["predict", "embed"])
def test_device_cuda_without_cuda_is_one_line(tmp_path: Path, capsys, command: str) -> None:
    (tmp_path / "in.txt").write_text("a b\n")
    tiny = ROOT / "tests/data/tiny_bilm"
    args = {
        "predict": [
            "predict",
            "--model",
            str(tmp_path),
            "--input",
            str(tmp_path / "in.txt"),
            "--device",
            "cuda",
        ],
        "embed": [
            "embed",
            "--options",
            str(tiny / "options.json"),
            "--weights",
            str(tiny / "weights.hdf5"),
            "--input",
            str(tmp_path / "in.txt"),
            "--output",
            str(tmp_path / "o.hdf5"),
            "--device",
            "cuda",
        ],
    }[command]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device cuda: torch" in err[0] and "use --device cpu" in err[0]


def test_a_symlink_loop_as_run_folder_is_one_line(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for args in (["report", str(loop)], ["compare", str(loop)]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and "loop" in err[0]
