"""The output policy of ``ner_app/files.py`` (docs/reliability.md#the-output-policy), in process on real files:
a command replaces only its own unchanged earlier output, or anything with --overwrite, and never removes a file
inside a folder it did not create."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ner_app.files import (
    MARKER,
    Claim,
    ForeignOutputError,
    atomic_folder,
    atomic_path,
    claim_file,
    claim_folder,
    write_into_folder,
    write_text,
)

PREDICT = Claim("predict")


def test_a_file_is_replaced_only_when_it_is_the_commands_own_and_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    claim_file(out, PREDICT)  # absent
    out.write_text("")
    claim_file(out, PREDICT)  # empty: nothing to lose
    write_text(out, '{"text": "a"}\n', PREDICT)
    marker = json.loads((tmp_path / f".out.jsonl{MARKER}").read_text())
    assert marker["command"] == "predict" and list(marker["files"]) == ["out.jsonl"]
    claim_file(out, PREDICT)  # its own, unchanged
    with pytest.raises(ForeignOutputError, match="is not an earlier output of convert"):
        claim_file(out, Claim("convert"))  # another command's output
    claim_file(out, Claim("report", also=("predict",)))  # one this command may redraw
    out.write_text('{"text": "b"}\n')  # changed by hand
    with pytest.raises(
        ForeignOutputError, match=r"^--output .*out.jsonl: exists and is not an earlier output"
    ):
        claim_file(out, PREDICT)
    claim_file(out, Claim("predict", overwrite=True))


def test_a_file_that_appears_during_the_work_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    claim_file(out, PREDICT)
    with pytest.raises(ForeignOutputError), atomic_path(out, PREDICT) as tmp:
        out.write_text("the user's, saved meanwhile")
        tmp.write_text("ours")
    assert out.read_text() == "the user's, saved meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]  # no temporary file, no marker


def test_a_damaged_marker_is_no_marker(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    write_text(out, "ours", PREDICT)
    for damage in ("[1, 2]", '{"command": "predict", "files": 3}', "{", '{"command": 1}'):
        (tmp_path / f".out.txt{MARKER}").write_text(damage)
        with pytest.raises(ForeignOutputError):
            claim_file(out, PREDICT)


def _folder(path: Path, claim: Claim, files: dict[str, str]) -> None:
    with atomic_folder(path, claim) as tmp:
        for name, text in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text)


def test_a_folder_is_replaced_only_when_it_is_the_commands_own_and_unchanged(tmp_path: Path) -> None:
    export, claim = tmp_path / "export", Claim("export")
    _folder(export, claim, {"tagger.json": "{}", "bilm/weights.hdf5": "w"})
    claim_folder(export, claim)
    _folder(export, claim, {"tagger.json": "{}", "bilm/weights.hdf5": "w2"})  # its own: replaced
    assert (export / "bilm/weights.hdf5").read_text() == "w2"
    with pytest.raises(ForeignOutputError, match="not an earlier output of calibrate"):
        claim_folder(export, Claim("calibrate"))  # never another command's export
    (export / "notes.txt").write_text("the user's")
    with pytest.raises(ForeignOutputError, match=r"it holds bilm/weights.hdf5, notes.txt, tagger.json"):
        claim_folder(export, claim)
    forced = Claim("export", overwrite=True)
    with pytest.raises(ForeignOutputError, match="holds notes.txt, which this output would remove"):
        _folder(export, forced, {"tagger.json": "{}"})
    assert (export / "notes.txt").read_text() == "the user's"
    (export / "notes.txt").unlink()
    (export / "tagger.json").write_text('{"edited": 1}')
    _folder(export, forced, {"tagger.json": "{}"})  # every file written anew (or its own): replaced
    assert sorted(p.name for p in export.iterdir()) == [MARKER, "tagger.json"]
    with pytest.raises(ForeignOutputError, match="is not a folder"):
        claim_folder(export / "tagger.json", forced)


def test_files_into_a_folder_it_did_not_create(tmp_path: Path) -> None:
    folder = tmp_path / "brat"
    write_into_folder(folder, [("a.ann", "T1\n"), ("a.txt", "x")], PREDICT)  # new: whole, with its marker
    assert sorted(p.name for p in folder.iterdir()) == [MARKER, "a.ann", "a.txt"]
    (folder / "notes.txt").write_text("the user's")
    write_into_folder(folder, [("a.ann", "T2\n"), ("b.ann", "T1\n")], PREDICT)  # its own files, unchanged
    assert (folder / "a.ann").read_text() == "T2\n" and (folder / "notes.txt").read_text() == "the user's"
    (folder / "b.ann").write_text("corrected\n")
    (folder / "c.ann").write_text("the user's own c\n")
    with pytest.raises(ForeignOutputError, match=r": b.ann \(and 1 more\) differs from what predict wrote"):
        write_into_folder(folder, [("a.ann", "T3\n"), ("b.ann", "T3\n"), ("c.ann", "T3\n")], PREDICT)
    assert (folder / "a.ann").read_text() == "T2\n"  # nothing written
    write_into_folder(folder, [("c.ann", "the user's own c\n")], PREDICT)  # the same text: nothing lost
    write_into_folder(folder, [("b.ann", "T4\n")], Claim("predict", overwrite=True))
    assert (folder / "b.ann").read_text() == "T4\n" and (folder / "notes.txt").is_file()
    write_into_folder(folder, [("a.ann", "T5\n")], PREDICT)  # a.ann still recorded from before
    with pytest.raises(ForeignOutputError, match="is not a folder"):
        write_into_folder(folder / "notes.txt", [("a.ann", "")], PREDICT)


def test_its_own_files_that_a_new_run_does_not_write_go_unless_changed(tmp_path: Path) -> None:
    folder = tmp_path / "brat"
    docs = [(f"doc{n}.{s}", f"{n}{s}") for n in (1, 2, 3) for s in ("txt", "ann")]
    write_into_folder(folder, docs, PREDICT)
    (folder / "doc3.ann").write_text("corrected")  # an annotator's correction of a document
    (folder / "notes.txt").write_text("the user's")
    write_into_folder(folder, docs[:2], PREDICT)  # a shorter input: doc2 was its own and unchanged
    assert sorted(p.name for p in folder.iterdir()) == [
        MARKER,
        "doc1.ann",
        "doc1.txt",
        "doc3.ann",
        "doc3.txt",
        "notes.txt",  # doc3 keeps its text
    ]
