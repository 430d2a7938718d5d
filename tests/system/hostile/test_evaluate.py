"""Hostile and careless input to evaluate (and the model-using commands' option pairs): one ``error:`` line,
exit code 2, nothing written or lost."""

from __future__ import annotations

from pathlib import Path

from ner_app.cli.commands import main
from tests.helpers import TINY, one_error_line


def test_predictions_never_overwrite_the_gold_file(trained: Path, tmp_path: Path, capsys) -> None:
    gold = tmp_path / "gold.conll"
    gold.write_bytes((TINY / "valid.txt").read_bytes())
    before = gold.read_bytes()
    assert main(["evaluate", "--model", str(trained / "export"), "--input", str(gold),
                 "--predictions", str(tmp_path / "." / "gold.conll")]) == 2  # fmt: skip
    one_error_line(capsys, "--predictions", "is the gold file --input; name another file")
    assert gold.read_bytes() == before


def test_predictions_into_a_folder_is_one_line(trained: Path, tmp_path: Path, capsys) -> None:
    assert main(["evaluate", "--model", str(trained / "export"), "--input", str(TINY / "valid.txt"),
                 "--predictions", str(tmp_path)]) == 2  # fmt: skip
    one_error_line(capsys, f"--predictions {tmp_path}: is a folder, expected a file name")
    assert list(tmp_path.iterdir()) == []


def test_input_folder_and_model_file_are_one_line(trained: Path, tmp_path: Path, capsys) -> None:
    assert main(["evaluate", "--model", str(trained / "export"), "--input", str(tmp_path)]) == 2
    one_error_line(capsys, f"--input {tmp_path}: not a file (expected a CoNLL file with gold tags)")
    assert main(["evaluate", "--model", str(TINY / "valid.txt"), "--input", str(TINY / "valid.txt")]) == 2
    one_error_line(capsys, "not a folder (expected an export directory)")


def test_embed_options_without_weights_is_one_line(tmp_path: Path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a b\n", encoding="utf-8")
    for pair in (["--options", "x.json"], ["--weights", "x.hdf5"]):
        assert main(["embed", *pair, "--input", str(source), "--output", str(tmp_path / "o.hdf5")]) == 2
        one_error_line(capsys, "--options and --weights go together (leave both out for the shipped biLM)")
    assert not (tmp_path / "o.hdf5").exists()


def test_export_needs_a_checkpoint_or_onnx(trained: Path, tmp_path: Path, capsys) -> None:
    assert main(["export", "--output", str(tmp_path / "out")]) == 2
    one_error_line(
        capsys, "export: give --checkpoint CKPT, or --onnx [--model EXPORT_DIR] to convert an export"
    )
    assert main(["export", "--model", str(trained / "export"), "--output", str(tmp_path / "out")]) == 2
    one_error_line(capsys, "export: give --checkpoint CKPT, or --onnx")
    assert not (tmp_path / "out").exists()
