"""Hostile and careless input to ``train --init-from`` and ``data.previous_dev``: every case is one ``error:``
line naming the path or the key, exit code 2, and no run started from it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ner_app.bilm.weights import save_bilm
from ner_app.cli.commands import main
from tests.helpers import TINY, one_error_line, random_bilm, train_args


def continued(run: Path, export: Path | str, *extra: str) -> int:
    return main(["train", "--init-from", str(export), *train_args(run, *extra)])


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp, trained: tmp / "nowhere", "not found (expected an export folder"),
        (lambda tmp, trained: trained / "checkpoints" / "best.ckpt", "a file, expected an export folder"),
        (lambda tmp, trained: trained / "checkpoints", "not a ner_app export (no tagger.json"),
    ],
    ids=["missing", "checkpoint", "not-an-export"],
)
def test_not_an_export_is_one_line(tmp_path, trained, capsys, make, expected) -> None:  # noqa: ANN001
    export = make(tmp_path, trained)
    run = tmp_path / "run"
    assert continued(run, export) == 2
    one_error_line(capsys, "model.init_from", str(export), expected)
    assert not run.exists()  # refused before anything is written


def test_onnx_folder_is_refused(tmp_path, trained, capsys) -> None:  # noqa: ANN001
    pytest.importorskip("onnxruntime")
    onnx = tmp_path / "onnx"
    assert main(["export", "--onnx", "--model", str(trained / "export"), "--output", str(onnx)]) == 0
    capsys.readouterr()
    assert continued(tmp_path / "run", onnx) == 2
    one_error_line(capsys, str(onnx), "ONNX graphs, which do not train", "tagger.json and model.safetensors")


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.lstm_hidden=32", "model.lstm_hidden is 32 in this run but 16 in the export"),
        ("model.word_dim=10", "model.word_dim is 10 in this run but 8"),
        ("data.scheme=BIO", "data.scheme is 'BIO' in this run but 'BIOES'"),
        ("data.lowercase=false", "data.lowercase is False"),
        ("elmo.enabled=false", "elmo.enabled is False in this run but True"),
        ("elmo.at_output=true", "elmo.at_output is True"),
    ],
)
def test_other_architecture_is_one_line(tmp_path, trained, capsys, override, expected) -> None:  # noqa: ANN001
    assert continued(tmp_path / "run", trained / "export", override) == 2
    one_error_line(capsys, str(trained / "export"), expected)


def test_other_bilm_is_one_line_saying_which_to_use(tmp_path, trained, capsys) -> None:  # noqa: ANN001
    options, weights = save_bilm(random_bilm(seed=5), tmp_path / "other_bilm")
    code = continued(
        tmp_path / "run", trained / "export", f"elmo.options={options}", f"elmo.weights={weights}"
    )
    assert code == 2
    export = trained / "export"
    one_error_line(capsys, "another biLM than the export's", f"elmo.options={export}/bilm/options.json")


def test_tampered_export_is_refused(tmp_path, trained, capsys) -> None:  # noqa: ANN001
    export = tmp_path / "export"
    shutil.copytree(trained / "export", export)
    weights = export / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert continued(tmp_path / "run", export) == 2
    one_error_line(capsys, str(export))


def test_previous_dev_problems_are_one_line(tmp_path, trained, capsys) -> None:  # noqa: ANN001
    export = trained / "export"
    assert main(["train", *train_args(tmp_path / "a", f"data.previous_dev={TINY / 'valid.txt'}")]) == 2
    one_error_line(capsys, "data.previous_dev", "needs model.init_from")
    assert continued(tmp_path / "b", export, f"data.previous_dev={tmp_path / 'gone.txt'}") == 2
    one_error_line(capsys, "data.previous_dev", "gone.txt: not found")
    partial = tmp_path / "partial.txt"
    partial.write_text("Alice B-PER\nmet -\nBob B-PER\n", encoding="utf-8")
    assert continued(tmp_path / "c", export, f"data.previous_dev={partial}") == 2
    one_error_line(capsys, f"{partial}:2:", "expected an annotated tag")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    assert continued(tmp_path / "d", export, f"data.previous_dev={empty}") == 2
    one_error_line(capsys, f"{empty}: no sentences")


def test_previous_dev_may_be_a_brat_folder(tmp_path, trained, capsys) -> None:  # noqa: ANN001
    """An existing brat folder is read as the old dev file (its error names its .ann), never "not found"; a
    folder without .ann files says so."""
    folder = tmp_path / "old_dev"
    folder.mkdir()
    (folder / "a.txt").write_text("Bob met Alice.\n", encoding="utf-8")
    (folder / "a.ann").write_text("T1\tPER 0 99\tBob\n", encoding="utf-8")
    assert continued(tmp_path / "run", trained / "export", f"data.previous_dev={folder}") == 2
    one_error_line(capsys, f"{folder}/a.ann:1: end offset 99 is beyond the text")
    (folder / "a.ann").unlink()
    assert continued(tmp_path / "run2", trained / "export", f"data.previous_dev={folder}") == 2
    one_error_line(capsys, f"data.previous_dev: {folder}: a folder without .ann files")
