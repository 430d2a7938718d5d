"""Hostile and careless input to select and find-threshold: one ``error:`` line, exit code 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ner_app.cli.commands import main
from tests.helpers import TINY, one_error_line


def pool(tmp_path: Path, text: str = "Alice flew to Paris.\nBob likes Berlin.\n") -> Path:
    path = tmp_path / "pool.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--k", "0"], "--k 0: expected an integer >= 1"),
        (["--k", "-3"], "--k -3: expected an integer >= 1"),
        (["--k", "two"], "--k 'two': expected an integer"),
        (
            ["--k", "1", "--strategy", "bald"],
            "--strategy 'bald': expected one of margin, entropy, least-confidence, mnlp, random",
        ),
        (["--k", "1", "--seed", "x"], "--seed 'x': expected an integer"),
        (["--tokens", "0"], "--tokens 0: expected an integer >= 1"),
        (["--tokens", "1e3"], "--tokens '1e3': expected an integer"),
        ([], "select: say how much to select: --k N (sentences), --tokens N (a token budget), or both"),
    ],
)
def test_bad_select_arguments_are_one_line(trained, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "out.txt"
    args = [
        "select",
        "--model",
        str(trained / "export"),
        "--input",
        str(pool(tmp_path)),
        "--output",
        str(out),
    ]
    assert main([*args, *extra]) == 2
    one_error_line(capsys, message)
    assert not out.exists()


@pytest.mark.parametrize("text", ["", "\n\n   \n", "-DOCSTART- -X- O O\n\n"])
def test_an_empty_pool_is_one_line(trained, tmp_path, capsys, text) -> None:
    out = tmp_path / "out.txt"
    source = pool(tmp_path, text)
    args = [
        "select",
        "--model",
        str(trained / "export"),
        "--input",
        str(source),
        "--output",
        str(out),
        "--k",
        "2",
    ]
    assert main(args) == 2
    one_error_line(capsys, f"--input {source}: no sentences in the pool")
    assert not out.exists()


def test_select_never_overwrites_its_pool_or_writes_into_a_folder(trained, tmp_path, capsys) -> None:
    source = pool(tmp_path)
    before = source.read_bytes()
    base = ["select", "--model", str(trained / "export"), "--k", "1"]
    assert main([*base, "--input", str(source), "--output", str(tmp_path / "." / "pool.txt")]) == 2
    one_error_line(capsys, "is the pool --input; name another file")
    assert source.read_bytes() == before
    assert main([*base, "--input", str(source), "--output", str(tmp_path)]) == 2
    one_error_line(capsys, f"--output {tmp_path}: is a folder, expected a file name")
    assert main([*base, "--input", str(tmp_path), "--output", str(tmp_path / "o.txt")]) == 2
    one_error_line(capsys, f"--input {tmp_path}: is a folder, expected a text or CoNLL file")
    assert main([*base, "--input", str(tmp_path / "missing.txt"), "--output", str(tmp_path / "o.txt")]) == 2
    one_error_line(capsys, "missing.txt: not found; expected a text or CoNLL file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.txt"]


def test_conll_output_of_a_text_pool_is_one_line(trained, tmp_path, capsys) -> None:
    out = tmp_path / "out.conll"
    args = [
        "select",
        "--model",
        str(trained / "export"),
        "--input",
        str(pool(tmp_path)),
        "--output",
        str(out),
    ]
    assert main([*args, "--k", "1", "--format", "conll"]) == 2
    one_error_line(capsys, "--format conll writes CoNLL token lines: it needs a CoNLL pool")
    assert not out.exists()


def test_a_bad_pool_byte_names_the_line(trained, tmp_path, capsys) -> None:
    source = tmp_path / "pool.txt"
    source.write_bytes(b"Alice flew to Paris.\nBob \xff Berlin.\n")
    out = tmp_path / "out.txt"
    args = [
        "select",
        "--model",
        str(trained / "export"),
        "--input",
        str(source),
        "--output",
        str(out),
        "--k",
        "1",
    ]
    assert main(args) == 2
    one_error_line(capsys, f"{source}:2: byte 5 (0xff) is not UTF-8")
    assert not out.exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "--precision 0: expected a fraction in (0, 1], such as 0.95"),
        ("1.5", "--precision 1.5: expected a fraction in (0, 1]"),
        ("95", "such as 0.95 (95% is 0.95)"),
        ("-0.2", "--precision -0.2: expected a fraction in (0, 1]"),
        ("nan", "--precision nan: expected a fraction in (0, 1]"),
        ("high", "--precision 'high': expected a fraction in (0, 1], such as 0.95"),
    ],
)
def test_bad_precision_is_one_line(trained, capsys, value, message) -> None:
    args = ["find-threshold", "--model", str(trained / "export"), "--input", str(TINY / "valid.txt")]
    assert main([*args, "--precision", value]) == 2
    one_error_line(capsys, message)
    assert capsys.readouterr().out == ""


def test_find_threshold_bad_gold_files_are_one_line(trained, tmp_path, capsys) -> None:
    base = ["find-threshold", "--model", str(trained / "export")]
    assert main([*base, "--input", str(tmp_path)]) == 2
    one_error_line(
        capsys,
        f"--input {tmp_path}: not a file (expected a gold file: CoNLL, an annotation export or a brat folder)",
    )
    (tmp_path / "raw.txt").write_text("Alice flew to Paris .\n", encoding="utf-8")
    assert main([*base, "--input", str(tmp_path / "raw.txt")]) == 2
    one_error_line(capsys, "raw.txt:1")
    partial = tmp_path / "partial.conll"
    partial.write_text("Alice I-PER\nflew -\n", encoding="utf-8")
    assert main([*base, "--input", str(partial)]) == 2
    one_error_line(capsys, "partial.conll:2: expected an annotated tag")


def test_select_output_never_replaces_a_file_it_did_not_write(trained, tmp_path, capsys) -> None:
    source = pool(tmp_path)
    out = tmp_path / "batch.txt"
    out.write_text("sentences the user picked by hand\n")
    base = ["select", "--model", str(trained / "export"), "--k", "1", "--input", str(source)]
    assert main([*base, "--output", str(out)]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {out}: exists and is not an earlier output of select (or was changed since); nothing "
        "was changed: choose another name, or add --overwrite to replace it"
    )
    assert out.read_text() == "sentences the user picked by hand\n"
    assert main([*base, "--output", str(out), "--overwrite"]) == 0
    assert main([*base, "--output", str(out)]) == 0  # its own earlier output
