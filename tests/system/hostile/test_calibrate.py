"""Hostile and careless input to calibrate: one ``error:`` line, exit code 2, nothing written or lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from ner_app.cli.commands import main
from tests.helpers import TINY, copy_export, one_error_line


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def calibrate(model: Path, dev: Path, output: Path) -> int:
    return main(["calibrate", "--model", str(model), "--dev", str(dev), "--output", str(output)])


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (None, "not found (expected a gold file: CoNLL, an annotation export or a brat folder)"),
        (b"", "no sentences"),
        (b"Alice\nflew\n\nBob\n", "expected at least 2 columns (token ... tag), found 1"),
        (b"Alice B-PER\nflew -\n", "expected an annotated tag, found '-'"),
        (b"Alice B-PER\nflew X-BAD\n", ":2:"),
        (b"\xff\xfe\x00bad", "dev.txt"),
    ],
    ids=["missing", "empty", "no-gold-tags", "unannotated", "bad-tag", "not-utf8"],
)
def test_bad_dev_files_are_one_line(
    trained: Path, tmp_path: Path, capsys, write: bytes | None, message: str
) -> None:
    dev = tmp_path / "dev.txt"
    if write is not None:
        dev.write_bytes(write)
    assert calibrate(trained / "export", dev, tmp_path / "out") == 2
    one_error_line(capsys, message)
    assert not (tmp_path / "out").exists()


def test_a_folder_as_dev_and_a_file_as_model(trained: Path, tmp_path: Path, capsys) -> None:
    assert calibrate(trained / "export", tmp_path, tmp_path / "out") == 2
    one_error_line(capsys, f"--dev {tmp_path}: not a regular file")
    assert calibrate(TINY / "valid.txt", TINY / "valid.txt", tmp_path / "out") == 2
    one_error_line(capsys, "--model", "not a folder (expected an export directory)")
    assert calibrate(tmp_path / "nothing", TINY / "valid.txt", tmp_path / "out") == 2
    one_error_line(capsys, "--model", "not a folder")
    assert list(tmp_path.iterdir()) == []


def test_output_inside_or_over_the_model_is_refused(trained: Path, tmp_path: Path, capsys) -> None:
    export = copy_export(trained, tmp_path)
    before = snapshot(export)
    for output in (export, export / "calibrated", export / "bilm"):
        assert calibrate(export, TINY / "valid.txt", output) == 2
        one_error_line(capsys, f"--output {output}: inside the export --model")
    assert calibrate(export, TINY / "valid.txt", tmp_path) == 2  # the folder holding the model
    one_error_line(capsys, "holds the export --model")
    assert snapshot(export) == before


def test_output_over_foreign_things_is_refused(trained: Path, tmp_path: Path, capsys) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    assert calibrate(trained / "export", TINY / "valid.txt", foreign) == 2
    one_error_line(
        capsys, "exists and is not an earlier output of calibrate, or was changed since (it holds keep.txt)"
    )
    assert snapshot(foreign) == {"keep.txt": b"mine"}
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    assert calibrate(trained / "export", TINY / "valid.txt", a_file) == 2
    one_error_line(capsys, "exists and is not a folder")
    assert a_file.read_text() == "mine"


def test_a_tagger_that_finds_no_entity_is_one_line(trained: Path, tmp_path: Path, capsys) -> None:
    # two epochs on the tiny data: the tagger predicts O everywhere, so there is nothing to fit on
    assert calibrate(trained / "export", TINY / "valid.txt", tmp_path / "out") == 2
    one_error_line(capsys, "the tagger finds no entity in it, so there is nothing to calibrate on")
    assert list(tmp_path.iterdir()) == []


def test_cuda_without_cuda_is_one_line(trained: Path, tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    args = [
        "--model",
        str(trained / "export"),
        "--dev",
        str(TINY / "valid.txt"),
        "--output",
        str(tmp_path / "o"),
    ]
    assert main(["calibrate", *args, "--device", "cuda"]) == 2
    one_error_line(capsys, "--device cuda")


@pytest.fixture(scope="module")
def finding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run trained long enough (12 epochs) that its tagger finds entities, so calibrate writes."""
    import train
    from tests.helpers import train_args

    run = tmp_path_factory.mktemp("calibrate") / "run"
    assert train.main(train_args(run, "trainer.max_epochs=12")) == 0
    return run


@pytest.mark.system
def test_calibrate_never_replaces_another_runs_export(finding: Path, tmp_path: Path, capsys) -> None:
    other = tmp_path / "other"  # another run's export, written by export
    ckpt = finding / "checkpoints/best.ckpt"
    assert main(["export", "--checkpoint", str(ckpt), "--output", str(other)]) == 0
    before = snapshot(other)
    assert calibrate(finding / "export", TINY / "valid.txt", other) == 2
    assert one_error_line(capsys).startswith(
        f"error: --output {other}: exists and is not an earlier output of calibrate, or was changed since (it "
        "holds "
    )
    assert snapshot(other) == before
    out = tmp_path / "calibrated"
    assert calibrate(finding / "export", TINY / "valid.txt", out) == 0
    assert calibrate(finding / "export", TINY / "valid.txt", out) == 0  # its own earlier output
    assert (
        main(
            [
                "calibrate",
                "--model",
                str(finding / "export"),
                "--dev",
                str(TINY / "valid.txt"),
                "--output",
                str(other),
                "--overwrite",
            ]
        )
        == 0
    )  # the user said so
