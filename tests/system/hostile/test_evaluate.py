"""Hostile and careless input to evaluate (and the model-using commands' option pairs): one ``error:`` line,
exit code 2, nothing written or lost."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from tests.helpers import TINY, broken_onnx, one_error_line


def test_predictions_never_overwrite_the_gold_file(trained: Path, tmp_path: Path, capsys) -> None:
    gold = tmp_path / "gold.conll"
    gold.write_bytes((TINY / "valid.txt").read_bytes())
    before = gold.read_bytes()
    assert (
        main(
            [
                "evaluate",
                "--model",
                str(trained / "export"),
                "--input",
                str(gold),
                "--predictions",
                str(tmp_path / "." / "gold.conll"),
            ]
        )
        == 2
    )
    one_error_line(capsys, "--predictions", "is the gold file --input; name another file")
    assert gold.read_bytes() == before


def test_predictions_into_a_folder_is_one_line(trained: Path, tmp_path: Path, capsys) -> None:
    assert (
        main(
            [
                "evaluate",
                "--model",
                str(trained / "export"),
                "--input",
                str(TINY / "valid.txt"),
                "--predictions",
                str(tmp_path),
            ]
        )
        == 2
    )
    one_error_line(capsys, f"--predictions {tmp_path}: is a folder, expected a file name")
    assert list(tmp_path.iterdir()) == []


def test_input_folder_and_model_file_are_one_line(trained: Path, tmp_path: Path, capsys) -> None:
    assert main(["evaluate", "--model", str(trained / "export"), "--input", str(tmp_path)]) == 2
    one_error_line(
        capsys,
        f"--input {tmp_path}: not a file (expected a gold file: CoNLL, an annotation export or a brat folder)",
    )
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
        capsys,
        "export: give --checkpoint CKPT, --model EXPORT_DIR --encoder-package NAME, or --onnx [--model "
        "EXPORT_DIR] to convert an export",
    )
    assert main(["export", "--model", str(trained / "export"), "--output", str(tmp_path / "out")]) == 2
    one_error_line(capsys, "export: give --checkpoint CKPT, --model EXPORT_DIR --encoder-package NAME")
    assert not (tmp_path / "out").exists()


def _evaluate(trained: Path, predictions: Path | str) -> list[str]:
    return [
        "evaluate",
        "--model",
        str(trained / "export"),
        "--input",
        str(TINY / "valid.txt"),
        "--predictions",
        str(predictions),
    ]


def test_predictions_write_through_a_character_device_and_never_replace_it(
    trained: Path, devices: dict[str, Path], capsys
) -> None:
    """mknod nodes in tmp_path stand for /dev/null and /dev/full: a write goes into them, never a rename."""
    assert main(_evaluate(trained, devices["null"])) == 0
    assert stat.S_ISCHR(devices["null"].lstat().st_mode)
    assert "wrote" in capsys.readouterr().err
    assert main(_evaluate(trained, devices["full"])) == 2
    one_error_line(capsys, str(devices["full"]), "No space left on device")
    assert stat.S_ISCHR(devices["full"].lstat().st_mode)
    assert sorted(p.name for p in devices["null"].parent.iterdir()) == ["full", "null"]


def test_predictions_into_a_fifo_reach_its_reader(
    trained: Path, fifo: Path, fifo_reader, unblock, capsys
) -> None:
    reader = fifo_reader(fifo)
    assert main(_evaluate(trained, fifo)) == 0
    data = reader.bytes()
    assert data.startswith(b"Alice I-PER ") and data.count(b"\n") == 39  # 34 tokens, 5 sentences
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and list(fifo.parent.iterdir()) == [fifo]


def test_predictions_into_a_fifo_without_a_reader_is_one_line(
    trained: Path, fifo: Path, unblock, capsys
) -> None:
    unblock(fifo, 60)  # on a blocking open, the test fails after a minute instead of hanging
    assert main(_evaluate(trained, fifo)) == 2
    one_error_line(capsys, f"{fifo}: a FIFO that no process is reading; start its reader first")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and list(fifo.parent.iterdir()) == [fifo]


def test_predictions_dash_and_a_link_to_dev_stdout_are_standard_output(
    trained: Path, tmp_path: Path, capsys
) -> None:
    """``-`` is standard output (the scores then go to stderr); a symlink to /dev/stdout is written through and
    stays a symlink (it was replaced by a regular file)."""
    assert main(_evaluate(trained, "-")) == 0
    out, err = capsys.readouterr()
    first = "Alice I-PER "
    assert out.startswith(first) and "| **all** |" not in out
    assert "| **all** |" in err and "wrote standard output" in err
    link = tmp_path / "out"
    link.symlink_to("/dev/stdout")
    assert main(_evaluate(trained, link)) == 0
    out, err = capsys.readouterr()
    assert out.startswith(first) and "| **all** |" in err
    assert link.is_symlink() and list(tmp_path.iterdir()) == [link]


def test_a_gold_file_that_is_a_fifo_or_a_device_is_one_line(
    trained: Path, fifo: Path, devices, unblock, capsys
) -> None:
    """A FIFO blocked forever and /dev/zero (here a mknod node with its numbers) filled the memory."""
    zero = devices["null"].parent / "zero"
    os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    unblock(fifo, 60)  # a blocking read fails the test after a minute instead of hanging it
    for gold in (fifo, zero):
        assert main(["evaluate", "--model", str(trained / "export"), "--input", str(gold)]) == 2
        one_error_line(
            capsys, f"--input {gold}: not a regular file (a FIFO or a device); expected a gold file"
        )


def test_a_10_mb_gold_line_is_named_not_pasted(trained: Path, tmp_path: Path, capsys) -> None:
    gold = tmp_path / "gold.conll"
    gold.write_text("EU B-ORG\n" + "y" * 10_000_000 + "\n", encoding="utf-8")
    assert main(["evaluate", "--model", str(trained / "export"), "--input", str(gold)]) == 2
    line = one_error_line(capsys, "gold.conll:2: expected 2 columns", "(10,000,000 characters)")
    assert len(line) < 400 and not (tmp_path / "predictions").exists()


def test_predictions_onto_a_block_device_or_a_socket_are_refused_before_the_work(
    trained: Path, tmp_path: Path, capsys
) -> None:
    """Never written into, never renamed over: a block node made here (a loop device's numbers) and a socket."""
    import socket

    block = tmp_path / "disk"
    os.mknod(block, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        for target, kind in ((block, "a block device"), (tmp_path / "sock", "a socket")):
            assert main(_evaluate(trained, target)) == 2
            one_error_line(capsys, f"--predictions {target}: is {kind}; expected a regular file")
        assert stat.S_ISBLK(block.lstat().st_mode) and stat.S_ISSOCK((tmp_path / "sock").lstat().st_mode)


def test_case_views_with_bad_input_are_one_line_and_write_nothing(
    trained: Path, tmp_path: Path, capsys
) -> None:
    """--case-views takes no value, and a bad gold file stops before any view is tagged."""
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "evaluate",
                "--model",
                str(trained / "export"),
                "--input",
                str(TINY / "valid.txt"),
                "--case-views=upper",
            ]
        )
    assert (
        exited.value.code == 2
        and "--case-views: ignored explicit argument 'upper'" in capsys.readouterr().err
    )
    gold = tmp_path / "gold.conll"
    gold.write_text("EU S-ORG\nrejects O\n", encoding="utf-8")
    out = tmp_path / "predicted.conll"
    args = ["evaluate", "--model", str(trained / "export"), "--input", str(gold), "--case-views"]
    assert main([*args, "--predictions", str(out)]) == 2
    one_error_line(capsys, str(gold), "evaluate reads IOB1 or IOB2 tags")
    assert not out.exists()
    gold.write_text("İSTANBUL B-LOC\nﬁnal O\n", encoding="utf-8")  # views that change a token's length
    assert main([*args, "--json"]) == 0
    views = json.loads(capsys.readouterr().out)["case_views"]
    assert list(views) == ["cased", "lower", "upper"]


def test_a_bad_gold_export_is_named_by_its_task(trained: Path, tmp_path: Path, capsys) -> None:
    """A Label Studio gold is read as training reads it (no longer as CoNLL: 'expected at least 2 columns ...
    found 1: ['); its mistakes are named by task, and an unknown format is named with --from's choices."""
    task = {
        "id": 4,
        "data": {"text": "Sony"},
        "annotations": [
            {
                "result": [
                    {"type": "labels", "value": {"start": 0, "end": 9, "text": "Sony", "labels": ["ORG"]}}
                ]
            }
        ],
    }
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps([task]))
    for command in ("evaluate", "find-threshold"):
        assert main([command, "--model", str(trained / "export"), "--gold", str(gold)]) == 2
        assert (
            one_error_line(capsys) == f"error: {gold}:task 4: end offset 9 is beyond the text (4 characters)"
        )
    odd = tmp_path / "gold.xyz"
    odd.write_text("just words\n")
    assert (
        main(["evaluate", "--model", str(trained / "export"), "--gold", str(odd), "--from", "doccano"]) == 2
    )
    one_error_line(capsys, f"{odd}:1: not valid JSON")


def test_predictions_never_replace_a_file_evaluate_did_not_write(
    trained: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "corrected.conll"
    out.write_text("-DOCSTART- O\n\nAlice B-PER B-PER\n")  # a file of the user's in the same layout
    command = ["evaluate", "--model", str(trained / "export"), "--gold", str(TINY / "valid.txt")]
    assert main([*command, "--predictions", str(out)]) == 2
    assert one_error_line(capsys) == (
        f"error: --predictions {out}: exists and is not an earlier output of evaluate (or was changed since); "
        "nothing was changed: choose another name, or add --overwrite to replace it"
    )
    assert out.read_text() == "-DOCSTART- O\n\nAlice B-PER B-PER\n"
    assert main([*command, "--predictions", str(out), "--overwrite"]) == 0
    assert main([*command, "--predictions", str(out)]) == 0  # its own earlier output


@pytest.mark.parametrize("damage", ["missing-graph", "changed-manifest", "missing-manifest"])
def test_evaluate_a_broken_onnx_folder_is_one_line(onnx_folder, tmp_path, capsys, damage) -> None:
    folder, expected = broken_onnx(onnx_folder, tmp_path, damage)
    out = tmp_path / "out"
    assert (
        main(
            [
                "evaluate",
                "--model",
                str(folder),
                *["--gold", str(TINY / "test.txt")],
                "--predictions",
                str(out),
            ]
        )
        == 2
    )
    captured = capsys.readouterr()
    assert captured.err.strip() == expected and captured.out == ""
    assert not out.exists()
