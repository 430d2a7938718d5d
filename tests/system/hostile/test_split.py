"""Hostile and careless input to ``split``: each case is one ``error:`` line naming the file (or option) and what
was expected, exit code 2, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from tests.helpers import one_error_line
from tests.text.test_split import corpus, write_format

# name: (extra arguments, what the error line is ({d}: the tmp folder, {i}: the input))
CASES: dict[str, tuple[list[str], str]] = {
    "dev beyond 1": (
        ["--dev", "2"],
        "error: --dev 2: expected a fraction between 0 and 1 (exclusive), e.g. 0.1",
    ),
    "dev zero": (["--dev", "0"], "error: --dev 0: expected a fraction between 0 and 1 (exclusive), e.g. 0.1"),
    "test not a number": (
        ["--test", "ten"],
        "error: --test ten: expected a fraction between 0 and 1 (exclusive), e.g. 0.1",
    ),
    "nothing left for train": (
        ["--dev", "0.5", "--test", "0.5"],
        "error: --dev 0.5 and --test 0.5 leave nothing for train; expected a sum below 1",
    ),
    "outside unknown": (
        ["--outside", "unknown"],
        "error: --outside unknown: split writes dev and test, which are scored and must be fully annotated; "
        "split a fully annotated export",
    ),
    "unknown label map": (["--labels", "PER"], "error: --labels: expected OLD=NEW pairs separated by commas"),
}


def _input(tmp_path: Path) -> Path:
    return write_format("doccano", corpus(12), tmp_path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_options_are_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    extra, expected = CASES[name]
    out = tmp_path / "out"
    assert main(["split", str(_input(tmp_path)), "--output", str(out), *extra]) == 2
    assert one_error_line(capsys).startswith(expected)
    assert not out.exists()


def test_a_missing_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["split", str(tmp_path / "nope.json"), "--output", str(tmp_path / "out")]) == 2
    assert one_error_line(capsys) == (
        f"error: {tmp_path / 'nope.json'}: not found (expected an export: a file, or a brat folder)"
    )
    assert not (tmp_path / "out").exists()


def test_a_folder_it_did_not_write_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _input(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["split", str(source), "--output", str(mine)]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {mine}: exists and is not an earlier output of split, or was changed since (it holds "
        "notes.txt); nothing was changed: choose another output folder, or add --overwrite to replace the files "
        "it writes"
    )
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    # an earlier output with a file of the user's added is not ours either
    assert main(["split", str(source), "--output", str(tmp_path / "out")]) == 0
    (tmp_path / "out" / "mine.txt").write_text("x")
    assert main(["split", str(source), "--output", str(tmp_path / "out")]) == 2
    one_error_line(
        capsys, "exists and is not an earlier output of split, or was changed since (it holds mine.txt"
    )


def test_an_output_that_is_a_file_or_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _input(tmp_path)
    (tmp_path / "file").write_text("x")
    assert main(["split", str(source), "--output", str(tmp_path / "file")]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {tmp_path / 'file'}: exists and is not a folder; nothing was changed: choose another "
        "output folder"
    )
    brat = write_format("brat", corpus(5), tmp_path)
    assert main(["split", str(brat), "--output", str(brat / "splits")]) == 2
    assert (
        one_error_line(capsys)
        == f"error: --output {brat / 'splits'}: is the input (or inside it); name a new folder"
    )
    assert not (brat / "splits").exists()


def test_too_few_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.txt"
    one.write_text("".join(f"w{i} O\nName B-PER\n\n" for i in range(10)))  # no -DOCSTART-: one document
    assert main(["split", str(one), "--output", str(tmp_path / "out")]) == 2
    assert one_error_line(capsys) == (
        f"error: {one}: 1 document of distinct text; expected at least 3, one for each of train, dev and test "
        "(a CoNLL file marks documents with -DOCSTART- lines; or split by sentence: --by sentence)"
    )
    same = write_format("doccano", [corpus(1)[0]] * 5, tmp_path)  # five copies of one text
    assert main(["split", str(same), "--output", str(tmp_path / "out")]) == 2
    one_error_line(capsys, f"{same}: 1 document of distinct text; expected at least 3")
    assert not (tmp_path / "out").exists()


def test_a_bad_record_is_named_by_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _input(tmp_path)
    source.write_text(source.read_text() + json.dumps({"text": "abc", "label": [[0, 99, "X"]]}) + "\n")
    assert main(["split", str(source), "--output", str(tmp_path / "out")]) == 2
    assert one_error_line(capsys) == f"error: {source}:13: end offset 99 is beyond the text (3 characters)"
    assert not (tmp_path / "out").exists()
    garbage = tmp_path / "export.json"
    garbage.write_text("[{")
    assert main(["split", str(garbage), "--output", str(tmp_path / "out"), "--from", "labelstudio"]) == 2
    one_error_line(capsys, f"{garbage}")
    assert not (tmp_path / "out").exists()


def test_labels_on_a_conll_input_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CoNLL is split as it is: a label map would be silently ignored, so it is refused."""
    source = write_format("conll", corpus(12), tmp_path)
    assert main(["split", str(source), "--output", str(tmp_path / "out"), "--types", "PER"]) == 2
    assert one_error_line(capsys) == (
        f"error: {source}: a CoNLL input is split as it is, its tags unchanged, so --labels and --types do not "
        "apply; rename or keep types with convert first (convert --labels ... --output all.conll)"
    )
    assert not (tmp_path / "out").exists()


def test_data_folder_errors_point_to_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder holding only the export (or dev.json) names the accepted file names and split; check-data FILE
    names --train."""
    source = write_format("labelstudio", corpus(12), tmp_path)
    assert main(["check-data", str(source)]) == 2
    assert one_error_line(capsys) == (
        f"error: {source}: not a folder; expected one holding train, valid and test files (one file per split: "
        f"--train {source} --dev FILE --test FILE; one export: ner-app split {source} --output DIR)"
    )
    for name in ("train.json", "dev.json", "test.json"):
        (tmp_path / name).write_text(source.read_text())
    assert main(["check-data", str(tmp_path)]) == 2
    assert one_error_line(capsys) == (
        f"error: {tmp_path / 'valid.txt'}: not found (data.dir must hold a train, a valid and a test file; "
        "valid's may be named valid.txt, valid.conll, valid.conllu, valid.jsonl, valid.json, valid/ (a brat "
        "folder); ner-app split makes the three from one export)"
    )


def test_a_split_changed_by_hand_is_not_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = _input(tmp_path), tmp_path / "out"
    assert main(["split", str(source), "--output", str(out)]) == 0
    assert main(["split", str(source), "--output", str(out), "--seed", "2"]) == 0  # its own: replaced
    with open(out / "test.txt", "a", encoding="utf-8") as f:
        f.write("Fixed B-PER\n\n")  # a gold file corrected by hand
    before = (out / "test.txt").read_bytes()
    assert main(["split", str(source), "--output", str(out)]) == 2
    assert one_error_line(capsys).startswith(
        f"error: --output {out}: exists and is not an earlier output of split, or was changed since (it holds "
    )
    assert (out / "test.txt").read_bytes() == before
    assert main(["split", str(source), "--output", str(out), "--overwrite"]) == 0  # the user said so
