"""Hostile and careless input to ``convert``: each case is one ``error: FILE:LINE: ...`` line naming what was
expected, exit code 2, and no output file, never a traceback; changed spans are named, not silently dropped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ner_app import limits
from ner_app.cli.commands import main
from tests.helpers import one_error_line

GOOD = json.dumps({"text": "Sony", "label": [[0, 4, "ORG"]]})
IMAGE_TASK = {
    "id": 7,
    "data": {"image": "/data/upload/1.jpg"},
    "annotations": [
        {
            "result": [
                {
                    "type": "rectanglelabels",
                    "from_name": "tag",
                    "to_name": "img",
                    "value": {"x": 1, "y": 2, "width": 3, "height": 4, "rectanglelabels": ["Car"]},
                }
            ]
        }
    ],
}
TEXT_TASK = {
    "id": 8,
    "data": {"text": "Sony"},
    "annotations": [
        {"result": [{"type": "labels", "value": {"start": 0, "end": 4, "text": "Sony", "labels": ["ORG"]}}]}
    ],
}

# name: (files {name: bytes}, --from, extra arguments, what the error line holds ({d}: the tmp folder))
CASES: dict[str, tuple[dict[str, bytes], str, list[str], str]] = {
    "malformed json": (
        {"a.jsonl": f'{GOOD}\n{{"text": "x", "label": [}}\n'.encode()},
        "doccano",
        [],
        "{d}/a.jsonl:2: not valid JSON",
    ),
    "not an object": (
        {"a.jsonl": b"[1, 2]\n"},
        "doccano",
        [],
        "{d}/a.jsonl:1: expected a JSON object, found list",
    ),
    "deep nesting": ({"a.jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n"}, "jsonl", [], "{d}/a.jsonl:1: "),
    "offset beyond the text": (
        {"a.jsonl": f"{GOOD}\n{json.dumps({'text': 'abc', 'label': [[0, 99, 'X']]})}\n".encode()},
        "doccano",
        [],
        "{d}/a.jsonl:2: end offset 99 is beyond the text (3 characters)",
    ),
    "negative offset": (
        {"a.jsonl": json.dumps({"text": "abc", "entities": [{"start": -1, "end": 2, "type": "X"}]}).encode()},
        "jsonl",
        [],
        "{d}/a.jsonl:1: start offset -1 is negative",
    ),
    "start not before end": (
        {"a.jsonl": json.dumps({"text": "abc", "label": [[2, 2, "X"]]}).encode()},
        "doccano",
        [],
        "{d}/a.jsonl:1: start 2 >= end 2; expected start < end",
    ),
    "offset not a number": (
        {"a.jsonl": json.dumps({"text": "abc", "label": [["0", 2, "X"]]}).encode()},
        "doccano",
        [],
        "{d}/a.jsonl:1: expected an integer start offset, found str",
    ),
    "label not a string": (
        {"a.jsonl": json.dumps({"text": "abc", "label": [[0, 2, 5]]}).encode()},
        "doccano",
        [],
        "{d}/a.jsonl:1: expected a label (a non-empty string), found int 5",
    ),
    "label with a space": (
        {"a.jsonl": json.dumps({"text": "abc", "label": [[0, 2, "New Type"]]}).encode()},
        "doccano",
        [],
        "{d}/a.jsonl:1: label 'New Type' is not an entity type",
    ),
    "classification export": (
        {"a.jsonl": json.dumps({"text": "abc", "label": ["positive"]}).encode()},
        "doccano",
        [],
        '{d}/a.jsonl:1: expected [start, end, "TYPE"]',
    ),
    "empty jsonl": ({"a.jsonl": b"\n\n"}, "prodigy", [], "{d}/a.jsonl: empty export"),
    "empty label studio": ({"a.json": b"[]"}, "labelstudio", [], "{d}/a.json: empty export: no tasks"),
    "label studio image project": (
        {"a.json": json.dumps([TEXT_TASK, IMAGE_TASK]).encode()},
        "labelstudio",
        [],
        "{d}/a.json:task 7: expected the task's text in data.text",
    ),
    "label studio image results": (
        {"a.json": json.dumps([{**IMAGE_TASK, "data": {"text": "x"}}]).encode()},
        "labelstudio",
        [],
        "{d}/a.json:task 7: a result of type 'rectanglelabels'; expected text spans",
    ),
    "label studio was_cancelled not a flag": (
        {
            "a.json": json.dumps(
                [{**TEXT_TASK, "annotations": [{"result": [], "was_cancelled": "yes"}]}]
            ).encode()
        },
        "labelstudio",
        [],
        "{d}/a.json:task 8, annotation 1: expected 'was_cancelled' true or false, found str \"yes\"",
    ),
    "label studio ground_truth not a flag": (
        {"a.json": json.dumps([{**TEXT_TASK, "annotations": [{"result": [], "ground_truth": 1}]}]).encode()},
        "labelstudio",
        [],
        "{d}/a.json:task 8, annotation 1: expected 'ground_truth' true or false, found int 1",
    ),
    "label studio bad json": (
        {"a.json": b'[{"id": 1,\n "data": }]'},
        "labelstudio",
        [],
        "{d}/a.json:2: not valid JSON",
    ),
    "brat ann without txt": ({"b.ann": b"T1\tORG 0 4\tSony\n"}, "brat", [], "{d}/b.ann: no b.txt beside it"),
    "brat bad line": (
        {"b.ann": b"T1\tORG zero 4\tSony\n", "b.txt": b"Sony"},
        "brat",
        [],
        "{d}/b.ann:1: expected integer offsets 'START END'",
    ),
    "mixed encodings jsonl": (
        {"a.jsonl": f"{GOOD}\n".encode() + '{"text": "Café", "label": []}\n'.encode("latin-1")},
        "doccano",
        [],
        "{d}/a.jsonl:2: expected UTF-8 text, found byte 0xe9 at column 14",
    ),
    "mixed encodings brat": (
        {"b.ann": b"T1\tORG 0 4\tSony\n", "b.txt": "Sony\nCafé\n".encode("latin-1")},
        "brat",
        [],
        "{d}/b.txt:2: expected UTF-8 text, found byte 0xe9",
    ),
    "conll tag column": (
        {"a.conll": b"EU B-ORG x\n"},
        "conll",
        ["--tag-column", "0"],
        "{d}/a.conll:1: the tag column 0",
    ),
    "conll bad tag": ({"a.conll": b"EU NNP ORG\n"}, "conll", [], "{d}/a.conll:1: expected a tag O, B-X"),
    "conllu columns": (
        {"a.conllu": b"1\tEU\teu\n"},
        "conllu",
        [],
        "{d}/a.conllu:1: expected 10 tab-separated",
    ),
    "overlap error": (
        {"a.jsonl": json.dumps({"text": "New York City", "label": [[0, 8, "LOC"], [0, 13, "LOC"]]}).encode()},
        "doccano",
        ["--overlap", "error"],
        "{d}/a.jsonl:1: 'New York City' (LOC) overlaps 'New York'",
    ),
    "bad label map": (
        {"a.jsonl": GOOD.encode()},
        "doccano",
        ["--labels", "ORG"],
        "--labels: expected OLD=NEW",
    ),
    "docstart in the text": (
        {"a.conllu": b"1\t-DOCSTART-\t_\t_\t_\t_\t0\troot\t_\t_\n"},
        "conllu",
        [],
        "{d}/a.conllu:1: the text holds the token -DOCSTART-",
    ),
    "unknown format": ({"a.xml": b"<x/>"}, "", [], "{d}/a.xml: cannot tell its format"),
    # read as given: what Python accepts and no export holds is one line naming the line, never a traceback
    "brat offset with two signs": (
        {"b.ann": b"T1\tORG --5 4\tSony\n", "b.txt": b"Sony"},
        "brat",
        [],
        "{d}/b.ann:1: expected integer offsets 'START END' after 'ORG', found '--5 4'",
    ),
    "brat offset a superscript digit": (
        {"b.ann": "T1\tORG \u00b2 4\tSony\n".encode(), "b.txt": b"Sony"},
        "brat",
        [],
        "{d}/b.ann:1: expected integer offsets 'START END' after 'ORG', found '\u00b2 4'",
    ),
    "json offset of 5,001 digits": (
        {"a.jsonl": f'{GOOD}\n{{"text": "Sony", "label": [[{"1" * 5001}, 4, "ORG"]]}}\n'.encode()},
        "doccano",
        [],
        "{d}/a.jsonl:2: a JSON integer of 5,001 digits; expected offsets and ids of at most 30 digits",
    ),
    "detected json offset of 5,001 digits": (
        {"a.jsonl": f'{{"text": "Sony", "label": [[{"1" * 5001}, 4, "ORG"]]}}\n'.encode()},
        "",
        [],
        "{d}/a.jsonl:1: a JSON integer of 5,001 digits",
    ),
    "lone surrogate in a text": (
        {"a.jsonl": b'{"text": "Sony \\ud800", "label": [[0, 4, "ORG"]]}\n'},
        "doccano",
        [],
        "{d}/a.jsonl:1: a lone surrogate escape \\ud800 in a JSON string",
    ),
    "lone low surrogate in a label": (
        {"a.jsonl": b'{"text": "Sony", "entities": [{"start": 0, "end": 4, "type": "OR\\udc00G"}]}\n'},
        "jsonl",
        [],
        "{d}/a.jsonl:1: a lone surrogate escape \\udc00 in a JSON string",
    ),
    "lone surrogate in label studio": (
        {"a.json": b'[{"id": 1,\n "data": {"text": "Sony \\udbff"}}]'},
        "labelstudio",
        [],
        "{d}/a.json:2: a lone surrogate escape \\udbff in a JSON string",
    ),
    "terminal escape in a label": (
        {"a.jsonl": json.dumps({"text": "Sony", "label": [[0, 4, "\x1b[31mORG"]]}).encode()},
        "doccano",
        [],
        "{d}/a.jsonl:1: label '\\x1b[31mORG' holds a control character",
    ),
    "terminal escape in a CoNLL-U type": (
        {"a.conllu": b"1\tSony\t_\t_\t_\t_\t_\t_\t_\tNE=\x1b[31mORG\n\n"},
        "conllu",
        [],
        "{d}/a.conllu:1: label '\\x1b[31mORG' is not an entity type",
    ),
    "terminal escape in --types": (
        {"a.jsonl": GOOD.encode()},
        "doccano",
        ["--types", "ORG,\x1b[2J"],
        "--types: label '\\x1b[2J' is not an entity type",
    ),
    "doccano read as prodigy": (
        {"a.jsonl": GOOD.encode()},
        "prodigy",
        [],
        "{d}/a.jsonl:1: no 'spans' but 'label': expected a Prodigy task",
    ),
    "label studio text a number": (
        {"a.json": json.dumps([{"id": 3, "data": {"text": 5}, "annotations": []}]).encode()},
        "labelstudio",
        [],
        "{d}/a.json:task 3: expected a string data.text, found int 5",
    ),
    "label studio tasks sharing an id": (
        {"a.json": json.dumps([TEXT_TASK, {**TEXT_TASK, "data": {"text": "ab"}}]).encode()},
        "labelstudio",
        [],
        "{d}/a.json:task 8 (#2 in the file): end offset 4 is beyond the text (2 characters)",
    ),
    "label studio time that is none": (
        {
            "a.json": json.dumps(
                [{**TEXT_TASK, "annotations": [{"result": [], "updated_at": "yesterday"}]}]
            ).encode()
        },
        "labelstudio",
        ["--annotation", "latest"],
        "{d}/a.json:task 8, annotation 1: expected an ISO 8601 time in updated_at or created_at",
    ),
    "conllu range whose words do not follow": (
        {"a.conllu": b"1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n5\tde\t_\t_\t_\t_\t_\t_\t_\t_\n\n"},
        "conllu",
        [],
        "{d}/a.conllu:2: expected word 1 of the multiword token 'du' (line 1), found word '5'",
    ),
    "conllu range cut by the sentence end": (
        {"a.conllu": b"1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n1\tde\t_\t_\t_\t_\t_\t_\t_\t_\n\n"},
        "conllu",
        [],
        "{d}/a.conllu:1: the multiword token 'du' ends the sentence before its words 2-2",
    ),
    "conllu range id with a superscript": (
        {"a.conllu": "1-\u00b3\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n\n".encode()},
        "conllu",
        [],
        "{d}/a.conllu:1: expected a multiword range ID such as 1-2",
    ),
}


def _run(tmp_path: Path, files: dict[str, bytes], fmt: str, extra: list[str]) -> tuple[int, Path]:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    inputs = sorted({str(tmp_path / n) for n in files if not n.endswith(".txt")} or {str(tmp_path)})
    out = tmp_path / "out" / "converted.conll"
    return main(["convert", *inputs, *(["--from", fmt] if fmt else []), "--output", str(out), *extra]), out


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_and_nothing_written(tmp_path, capsys, name):
    files, fmt, extra, expected = CASES[name]
    code, out = _run(tmp_path, files, fmt, extra)
    assert code == 2
    one_error_line(capsys, expected.format(d=tmp_path))
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_a_line_beyond_the_bound_is_refused_unread(tmp_path, capsys, monkeypatch):
    """The bound (64 MiB a line) stands in for a 1 GB line: lowered here, the same code path refuses it."""
    monkeypatch.setattr(limits, "MAX_ANNOTATION_LINE_BYTES", 10_000)
    huge = json.dumps({"text": "x" * 20_000, "label": []})
    code, out = _run(tmp_path, {"a.jsonl": f"{GOOD}\n{huge}\n".encode()}, "doccano", [])
    assert code == 2 and not out.exists()
    one_error_line(capsys, f"{tmp_path}/a.jsonl:2: a line longer than 10,000 bytes")


def test_a_file_beyond_the_bound_is_refused_unread(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, "MAX_ANNOTATION_FILE_BYTES", 1000)
    code, out = _run(tmp_path, {"a.json": json.dumps([TEXT_TASK] * 50).encode()}, "labelstudio", [])
    assert code == 2 and not out.exists()
    one_error_line(capsys, f"{tmp_path}/a.json: larger than 1,000 bytes")


def test_changed_spans_are_named_not_errors(tmp_path, capsys):
    """A discontinuous brat span, a Prodigy span whose text is not at its offsets: named, dropped, converted."""
    (tmp_path / "b.txt").write_text("New and York Sony", encoding="utf-8")
    (tmp_path / "b.ann").write_text("T1\tLOC 0 3;8 12\tNew York\nT2\tORG 13 17\tSony\n", encoding="utf-8")
    prodigy = tmp_path / "p.jsonl"
    prodigy.write_text(
        json.dumps(
            {
                "text": "Sony Bank",
                "spans": [{"start": 0, "end": 4, "label": "ORG", "text": "Bank"}],
                "answer": "accept",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.conll"
    assert main(["convert", str(tmp_path / "b.ann"), "--from", "brat", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0]
        == f"{tmp_path}/b.ann:1: dropped 'New … York' (LOC): a discontinuous span (0 3;8 12) that no tag sequence holds"
    )
    assert "entities; spans moved 0, cut 0, dropped 1" in lines[-1]
    assert main(["convert", str(prodigy), "--from", "prodigy", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0]
        == f"{prodigy}:1: dropped 'Sony' (ORG): the file gives its text as 'Bank': the offsets do not point at it"
    )


def test_never_over_an_input_or_a_file_it_did_not_write(tmp_path, capsys):
    data = tmp_path / "a.jsonl"
    data.write_text(GOOD + "\n", encoding="utf-8")
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes\n", encoding="utf-8")
    assert main(["convert", str(data), "--from", "doccano", "--output", str(mine)]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {mine}: exists and is not an earlier output of convert (or was changed since); nothing "
        "was changed: choose another name, or add --overwrite to replace it"
    )
    assert mine.read_text(encoding="utf-8") == "my notes\n"
    assert main(["convert", str(data), "--output", str(tmp_path / "a.json")]) == 2
    one_error_line(capsys, "expected an output name ending in .conll, .txt or .jsonl")
    copy = tmp_path / "b.jsonl"
    copy.write_text(GOOD + "\n", encoding="utf-8")
    assert main(["convert", str(copy), "--from", "jsonl", "--output", str(copy)]) == 2
    one_error_line(capsys, "is an input")
    # its own earlier output is replaced
    out = tmp_path / "out.conll"
    assert main(["convert", str(data), "--output", str(out)]) == 0
    assert main(["convert", str(data), "--output", str(out), "--labels", "ORG=COMPANY"]) == 0
    assert "B-COMPANY" in out.read_text(encoding="utf-8")


def test_missing_input_is_one_line(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o.conll")]) == 2
    one_error_line(capsys, "nope.jsonl: not found")


def test_a_line_beyond_the_real_bound_is_refused(tmp_path, capsys):
    """The real 64 MiB bound: a longer line (the head of a 1 GB one) is refused after reading the bound only."""
    path = tmp_path / "a.jsonl"
    with open(path, "wb") as f:
        f.write(GOOD.encode() + b'\n{"text": "')
        f.write(b"x" * (limits.MAX_ANNOTATION_LINE_BYTES + 16))
        f.write(b'", "label": []}\n')
    out = tmp_path / "out.conll"
    assert main(["convert", str(path), "--from", "doccano", "--output", str(out)]) == 2
    one_error_line(capsys, f"{path}:2: a line longer than 67,108,864 bytes")
    assert not out.exists()


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("export.jsonl", "doccano"),
        ("export.jsonl", "prodigy"),
        ("export.json", None),
        ("export.conll", "conll"),
    ]
    + [("export.conllu", None)],
)
def test_a_fifo_export_is_one_line_at_once(tmp_path, capsys, name, fmt):
    """Opening a FIFO blocks until a writer comes: the readers ask before they open."""
    fifo = tmp_path / name
    os.mkfifo(fifo)
    given = [] if fmt is None else ["--from", fmt]
    code = main(["convert", str(fifo), *given, "--output", str(tmp_path / "out.conll")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not a regular file" in err[0] and str(fifo) in err[0], err
    assert not (tmp_path / "out.conll").exists()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("gold.conll", "-DOCSTART- O\n\nSony B-ORG\nfixed O\n"),  # a gold file corrected by hand
        ("export.jsonl", '{"text": "Sony", "label": [[0, 4, "ORG"]]}\n'),  # a doccano export
    ],
)
def test_a_file_that_only_looks_like_its_output_is_not_replaced(tmp_path, capsys, name, content):
    data = tmp_path / "a.jsonl"
    data.write_text(GOOD + "\n", encoding="utf-8")
    out = tmp_path / name
    out.write_text(content, encoding="utf-8")
    assert main(["convert", str(data), "--from", "doccano", "--output", str(out)]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {out}: exists and is not an earlier output of convert (or was changed since); nothing "
        "was changed: choose another name, or add --overwrite to replace it"
    )
    assert out.read_text(encoding="utf-8") == content
    # convert's own output, corrected by hand since, is the user's now
    mine = tmp_path / f"mine{out.suffix}"
    assert main(["convert", str(data), "--from", "doccano", "--output", str(mine)]) == 0
    mine.write_text(mine.read_text(encoding="utf-8").replace("ORG", "MISC"), encoding="utf-8")
    assert main(["convert", str(data), "--from", "doccano", "--output", str(mine)]) == 2
    one_error_line(capsys, "exists and is not an earlier output of convert (or was changed since)")
    assert "MISC" in mine.read_text(encoding="utf-8")
    assert main(["convert", str(data), "--from", "doccano", "--output", str(out), "--overwrite"]) == 0
    assert out.read_text(encoding="utf-8") != content


def _brat(folder: Path, name: str, text: str, ann: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    (folder / f"{name}.ann").write_text(ann, encoding="utf-8")


def test_a_brat_file_that_links_outside_its_folder_is_refused(tmp_path, capsys):
    """A ``.txt`` (or ``.ann``, or a folder) of a brat collection that is a symbolic link out of it is refused,
    whether the folder or the ``.ann`` is given: its target's text would be copied into the training data."""
    secret = tmp_path / "secret.txt"
    secret.write_text("private words\n", encoding="utf-8")
    folder = tmp_path / "brat"
    _brat(folder, "a", "Sony makes\n", "T1\tORG 0 4\tSony\n")
    (folder / "b.txt").symlink_to(secret)
    (folder / "b.ann").write_text("T1\tORG 0 7\tprivate\n", encoding="utf-8")
    out = tmp_path / "out.conll"
    for given in (folder, folder / "b.ann"):
        assert main(["convert", str(given), "--from", "brat", "--output", str(out)]) == 2
        one_error_line(capsys, f"{folder}/b.txt: resolves outside {folder} (a symbolic link or '..')")
        assert not out.exists()
    (folder / "b.txt").unlink()
    (folder / "b.ann").unlink()
    _brat(tmp_path / "elsewhere", "c", "private words\n", "T1\tORG 0 7\tprivate\n")
    (folder / "sub").symlink_to(tmp_path / "elsewhere")
    assert main(["convert", str(folder), "--from", "brat", "--output", str(out)]) == 2
    one_error_line(capsys, f"{folder}/sub: resolves outside {folder} (a symbolic link or '..')")
    assert not out.exists()


def test_a_brat_ann_with_a_bom_keeps_its_first_annotation(tmp_path, capsys):
    folder = tmp_path / "brat"
    _brat(folder, "a", "Sony makes chips\n", "\ufeffT1\tORG 0 4\tSony\nT2\tPRODUCT 11 16\tchips\n")
    out = tmp_path / "out.conll"
    assert main(["convert", str(folder / "a.ann"), "--strict", "--output", str(out)]) == 0
    assert "2 entities; spans moved 0, cut 0, dropped 0;" in capsys.readouterr().out
    assert "Sony B-ORG" in out.read_text(encoding="utf-8")
    (folder / "annotation.conf").write_text("\ufeff[entities]\nORG\nPRODUCT\n", encoding="utf-8")
    assert main(["convert", str(folder), "--from", "brat", "--strict", "--output", str(out)]) == 0
    assert "2 entities; spans moved 0, cut 0, dropped 0;" in capsys.readouterr().out


def test_partial_conll_converts_with_its_unknown_tags(tmp_path, capsys):
    """The documented partial annotation (``-`` tags) converts; a tag its unknown neighbour could change in the
    output's scheme (BIOES: is ``B-ORG -`` an S-ORG or a B-ORG?) becomes ``-`` too, never guessed."""
    data = tmp_path / "partial.conll"
    data.write_text("Sony B-ORG\nmakes -\nchips O\n\n", encoding="utf-8")
    out = tmp_path / "out.conll"
    assert main(["convert", str(data), "--from", "conll", "--output", str(out)]) == 0
    assert "Sony B-ORG\nmakes -\nchips O\n" in out.read_text(encoding="utf-8")
    assert main(["convert", str(data), "--from", "conll", "--scheme", "BIOES", "--output", str(out)]) == 0
    assert "Sony -\nmakes -\nchips O\n" in out.read_text(encoding="utf-8")
    assert main(["convert", str(data), "--labels", "ORG=COMPANY", "--output", str(out)]) == 0
    assert "Sony B-COMPANY\nmakes -\n" in out.read_text(encoding="utf-8")
    capsys.readouterr()


def test_formats_told_apart_by_their_keys_not_their_first_line(tmp_path, capsys):
    """A doccano line with an ``answer`` field is doccano (its labels read), a CoNLL file opening with a BOM is
    CoNLL."""
    doccano = tmp_path / "a.jsonl"
    doccano.write_text(json.dumps({"text": "Sony", "label": [[0, 4, "ORG"]], "answer": "accept"}) + "\n")
    conll = tmp_path / "b.data"
    conll.write_bytes(b"\xef\xbb\xbf-DOCSTART-\n\nSony B-ORG\n\n")
    out = tmp_path / "out.conll"
    for data in (doccano, conll):
        assert main(["convert", str(data), "--output", str(out)]) == 0
        assert "1 entities" in capsys.readouterr().out
        assert "Sony B-ORG" in out.read_text(encoding="utf-8")


def test_latest_annotation_is_the_latest_in_time(tmp_path, capsys):
    """``--annotation latest`` compares times, not strings: 13:00+02:00 is before 12:00Z, .9 s before .95 s."""
    region = {"type": "labels", "value": {"start": 0, "end": 4, "text": "Sony", "labels": ["ORG"]}}

    def task(first: str, second: str) -> dict:
        return {
            "id": 1,
            "data": {"text": "Sony"},
            "annotations": [
                {"result": [region], "updated_at": first},
                {
                    "result": [{**region, "value": {**region["value"], "labels": ["PER"]}}],
                    "updated_at": second,
                },
            ],
        }

    out = tmp_path / "out.conll"
    for first, second in (
        ("2024-05-01T13:00:00+02:00", "2024-05-01T12:00:00Z"),
        ("2024-05-01T12:00:00.9Z", "2024-05-01T12:00:00.95Z"),
    ):
        (tmp_path / "a.json").write_text(json.dumps([task(first, second)]), encoding="utf-8")
        assert (
            main(["convert", str(tmp_path / "a.json"), "--annotation", "latest", "--output", str(out)]) == 0
        )
        assert "Sony B-PER" in out.read_text(encoding="utf-8"), (first, second)
    capsys.readouterr()
