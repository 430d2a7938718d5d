"""Every input format of ``convert``, written by the tests from its public schema, converts to the same
entities as the equivalent CoNLL file (written by hand below, not by the program)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.text.conll import read_conll
from ner_app.text.tags import convert

DOCS = [
    "Sony bought Columbia Pictures in 1989. Alice Smith lives in New York.",
    "Angela Merkel visited Paris on Monday.",
]
ENTITIES = [
    [("Sony", "ORG"), ("Columbia Pictures", "ORG"), ("Alice Smith", "PER"), ("New York", "LOC")],
    [("Angela Merkel", "PER"), ("Paris", "LOC")],
]
# The same corpus as CoNLL-2003 writes it: four columns, IOB1, -DOCSTART- before each document.
REFERENCE = """-DOCSTART- -X- -X- O

Sony NNP B-NP I-ORG
bought VBD B-VP O
Columbia NNP B-NP I-ORG
Pictures NNPS I-NP I-ORG
in IN B-PP O
1989 CD B-NP O
. . O O

Alice NNP B-NP I-PER
Smith NNP I-NP I-PER
lives VBZ B-VP O
in IN B-PP O
New NNP B-NP I-LOC
York NNP I-NP I-LOC
. . O O

-DOCSTART- -X- -X- O

Angela NNP B-NP I-PER
Merkel NNP I-NP I-PER
visited VBD B-VP O
Paris NNP B-NP I-LOC
on IN B-PP O
Monday NNP B-NP O
. . O O
"""


def offsets(doc: int) -> list[tuple[int, int, str]]:
    """Character spans of the entities of document ``doc``, found left to right."""
    found, at = [], 0
    for text, kind in ENTITIES[doc]:
        start = DOCS[doc].index(text, at)
        found.append((start, start + len(text), kind))
        at = start + len(text)
    return found


def sentences_of(path: Path) -> list[tuple[list[str], list[str], int]]:
    return [(s.tokens, s.tags, s.doc) for s in read_conll(path)]


def expected(tmp_path: Path) -> list[tuple[list[str], list[str], int]]:
    """REFERENCE's sentences with IOB2 tags (convert's default output), converted by the tag grammar."""
    reference = tmp_path / "reference_expected.conll"
    reference.write_text(REFERENCE, encoding="utf-8")
    return [(s.tokens, convert(s.tags, "IOB1", "IOB2"), s.doc) for s in read_conll(reference)]


def write_reference(tmp: Path) -> list[Path]:
    path = tmp / "reference.conll"
    path.write_text(REFERENCE, encoding="utf-8")
    return [path]


def write_doccano(tmp: Path, key: str = "label") -> list[Path]:
    lines = [json.dumps({"id": i, "text": t, key: [list(s) for s in offsets(i)]}) for i, t in enumerate(DOCS)]
    path = tmp / f"doccano_{key}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [path]


def write_doccano_entities(tmp: Path) -> list[Path]:
    lines = [
        json.dumps(
            {
                "id": i,
                "text": t,
                "entities": [
                    {"id": k, "label": kind, "start_offset": s, "end_offset": e}
                    for k, (s, e, kind) in enumerate(offsets(i))
                ],
                "relations": [],
            }
        )
        for i, t in enumerate(DOCS)
    ]
    path = tmp / "doccano_entities.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [path]


def _ls_result(doc: int) -> list[dict[str, object]]:
    return [
        {
            "id": f"r{k}",
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "origin": "manual",
            "value": {"start": s, "end": e, "text": DOCS[doc][s:e], "labels": [kind]},
        }
        for k, (s, e, kind) in enumerate(offsets(doc))
    ]


def write_labelstudio(tmp: Path) -> list[Path]:
    wrong = [
        {
            "id": "x",
            "type": "labels",
            "from_name": "label",
            "to_name": "text",
            "value": {"start": 0, "end": 4, "text": "Sony", "labels": ["PER"]},
        }
    ]
    tasks = [
        {
            "id": 10 + i,
            "data": {"text": text},
            "project": 3,
            "annotations": [
                # a cancelled annotation comes first: it is skipped
                {"id": 1, "result": wrong, "was_cancelled": True, "ground_truth": False},
                {
                    "id": 2,
                    "result": [*_ls_result(i), {"type": "relation", "from_id": "r0", "to_id": "r1"}],
                    "was_cancelled": False,
                    "completed_by": 1,
                    "updated_at": "2024-01-02T00:00:00Z",
                },
            ],
            "predictions": [],
        }
        for i, text in enumerate(DOCS)
    ]
    path = tmp / "labelstudio.json"
    path.write_text(json.dumps(tasks, indent=2), encoding="utf-8")
    return [path]


def write_prodigy(tmp: Path) -> list[Path]:
    lines = []
    for i, text in enumerate(DOCS):
        spans = [{"start": s, "end": e, "label": kind} for s, e, kind in offsets(i)]
        lines.append(json.dumps({"text": text, "spans": spans, "answer": "accept", "_input_hash": i}))
        # a rejected and an ignored task: not read
        lines.append(
            json.dumps({"text": "Bob", "spans": [{"start": 0, "end": 3, "label": "PER"}], "answer": "reject"})
        )
        lines.append(json.dumps({"text": "Bob", "spans": [], "answer": "ignore"}))
    path = tmp / "prodigy.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [path]


def write_prodigy_tokens(tmp: Path) -> list[Path]:
    """Spans given by Prodigy token indices only (token_end inclusive), tokens with their offsets."""
    from ner_app.text.tokenizer import tokenize

    lines = []
    for i, text in enumerate(DOCS):
        tokens = [
            {"text": t.text, "start": t.start, "end": t.end, "id": k} for k, t in enumerate(tokenize(text))
        ]
        spans = []
        for s, e, kind in offsets(i):
            first = next(t["id"] for t in tokens if t["start"] == s)
            last = next(t["id"] for t in tokens if t["end"] == e)
            spans.append({"token_start": first, "token_end": last, "label": kind})
        lines.append(json.dumps({"text": text, "tokens": tokens, "spans": spans, "answer": "accept"}))
    path = tmp / "prodigy_tokens.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [path]


def write_brat(tmp: Path) -> list[Path]:
    folder = tmp / "brat"
    folder.mkdir()
    for i, text in enumerate(DOCS):
        (folder / f"doc{i}.txt").write_text(text, encoding="utf-8")
        lines = [f"T{k + 1}\t{kind} {s} {e}\t{text[s:e]}" for k, (s, e, kind) in enumerate(offsets(i))]
        lines.append("R1\tWorks_for Arg1:T1 Arg2:T2")  # relations and notes are skipped
        lines.append("#1\tAnnotatorNotes T1\tchecked")
        (folder / f"doc{i}.ann").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [folder]


def write_jsonl(tmp: Path) -> list[Path]:
    lines = [
        json.dumps(
            {
                "text": t,
                "entities": [
                    {"start": s, "end": e, "type": kind, "text": t[s:e], "score": 0.9}
                    for s, e, kind in offsets(i)
                ],
            }
        )
        for i, t in enumerate(DOCS)
    ]
    path = tmp / "predicted.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [path]


def _reference_rows() -> list[list[tuple[str, str]] | None]:
    """(token, IOB1 tag) rows of REFERENCE; None for a -DOCSTART- line."""
    rows: list[list[tuple[str, str]] | None] = []
    sentence: list[tuple[str, str]] = []
    for line in REFERENCE.split("\n"):
        fields = line.split()
        if not fields:
            if sentence:
                rows.append(sentence)
                sentence = []
        elif fields[0] == "-DOCSTART-":
            rows.append(None)
        else:
            sentence.append((fields[0], fields[-1]))
    return rows


def write_conllu(tmp: Path) -> list[Path]:
    lines, n = [], 0
    for row in _reference_rows():
        if row is None:
            n += 1
            lines.append(f"# newdoc id = d{n}")
            continue
        lines.append(f"# text = {' '.join(t for t, _ in row)}")
        for k, (token, tag) in enumerate(row, start=1):
            ne = "" if tag == "O" else f"NE={tag}|"
            lines.append(f"{k}\t{token}\t{token.lower()}\tX\t_\t_\t0\tdep\t_\t{ne}SpaceAfter=No")
        lines.append("")
    path = tmp / "corpus.conllu"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [path]


def write_tsv_bioes(tmp: Path) -> list[Path]:
    """Two tab-separated columns in BIOES."""
    out = []
    for row in _reference_rows():
        if row is None:
            out.append("-DOCSTART-\tO\n")
            continue
        tags = convert([t for _, t in row], "IOB1", "BIOES")
        out.append("".join(f"{tok}\t{tag}\n" for (tok, _), tag in zip(row, tags, strict=True)) + "\n")
    path = tmp / "bioes.tsv"
    path.write_text("".join(out), encoding="utf-8")
    return [path]


def write_io_middle_column(tmp: Path) -> list[Path]:
    """IO tags (no B-) in the second of three columns: read with --tag-column 1."""
    out = []
    for row in _reference_rows():
        out.append(
            "-DOCSTART- O x\n" if row is None else "".join(f"{tok} {tag} x\n" for tok, tag in row) + "\n"
        )
    path = tmp / "io.txt"
    path.write_text("".join(out), encoding="utf-8")
    return [path]


WRITERS = {
    "conll-iob1": (write_reference, "conll"),
    "doccano": (write_doccano, "doccano"),
    "doccano-labels": (lambda tmp: write_doccano(tmp, "labels"), "doccano"),
    "doccano-entities": (write_doccano_entities, "doccano"),
    "labelstudio": (write_labelstudio, "labelstudio"),
    "prodigy": (write_prodigy, "prodigy"),
    "prodigy-tokens": (write_prodigy_tokens, "prodigy"),
    "brat": (write_brat, "brat"),
    "jsonl": (write_jsonl, "jsonl"),
    "conllu": (write_conllu, "conllu"),
    "tsv-bioes": (write_tsv_bioes, "conll"),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
@pytest.mark.parametrize("detect", [False, True])
def test_each_format_gives_the_reference_entities(tmp_path, capsys, name, detect):
    want = expected(tmp_path)
    write, fmt = WRITERS[name]
    inputs = [str(p) for p in write(tmp_path)]
    out = tmp_path / "out.conll"
    from_ = [] if detect else ["--from", fmt]
    assert main(["convert", *inputs, *from_, "--output", str(out), "--strict"]) == 0
    assert sentences_of(out) == want
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith(
        "2 documents, 3 sentences, 21 tokens, 6 entities; spans moved 0, cut 0, dropped 0"
    )


def test_io_tags_in_a_middle_column(tmp_path):
    want = expected(tmp_path)
    (path,) = write_io_middle_column(tmp_path)
    out = tmp_path / "out.conll"
    assert main(["convert", str(path), "--from", "conll", "--tag-column", "1", "--output", str(out)]) == 0
    assert sentences_of(out) == want


def test_jsonl_output_reads_back_to_the_same_conll(tmp_path):
    """A span format to JSONL (predict's format), then JSONL to CoNLL: the reference entities again."""
    want = expected(tmp_path)
    (doccano,) = write_doccano(tmp_path)
    middle = tmp_path / "middle.jsonl"
    assert main(["convert", str(doccano), "--output", str(middle)]) == 0
    records = [json.loads(line) for line in middle.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in records] == DOCS
    assert [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in records] == [
        offsets(0),
        offsets(1),
    ]
    out = tmp_path / "out.conll"
    assert main(["convert", str(middle), "--output", str(out)]) == 0
    assert sentences_of(out) == want


def test_output_schemes(tmp_path):
    (doccano,) = write_doccano(tmp_path)
    out = tmp_path / "out.conll"
    assert main(["convert", str(doccano), "--output", str(out), "--scheme", "BIOES"]) == 0
    tags = [t for s in read_conll(out) for t in s.tags]
    assert tags[:4] == ["S-ORG", "O", "B-ORG", "E-ORG"]


def test_conllu_multiword_tokens_are_one_token(tmp_path):
    """A multiword token (``1-2 du``) is one token tagged from its words; empty nodes are skipped."""
    rows = [
        "# newdoc id = a",
        "# text = Il parle du Parc des Princes .",
        "1\tIl\til\tPRON\t_\t_\t2\tnsubj\t_\tNE=O",
        "2\tparle\tparler\tVERB\t_\t_\t0\troot\t_\t_",
        "3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_",
        "3\tde\tde\tADP\t_\t_\t5\tcase\t_\tNE=O",
        "4\tle\tle\tDET\t_\t_\t5\tdet\t_\tNE=B-LOC",
        "5\tParc\tparc\tPROPN\t_\t_\t2\tobl\t_\tname=I-LOC",
        "5.1\tx\tx\tX\t_\t_\t_\t_\t_\tNE=B-PER",
        "6-7\tdes\t_\t_\t_\t_\t_\t_\t_\t_",
        "6\tde\tde\tADP\t_\t_\t7\tcase\t_\tNE=I-LOC",
        "7\tles\tle\tDET\t_\t_\t8\tdet\t_\tNE=I-LOC",
        "8\tPrinces\tprince\tPROPN\t_\t_\t5\tnmod\t_\tNE=I-LOC|SpaceAfter=No",
        "9\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_",
        "",
    ]
    path = tmp_path / "fr.conllu"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out.conll"
    assert main(["convert", str(path), "--output", str(out)]) == 0
    (sentence,) = read_conll(out)
    assert sentence.tokens == ["Il", "parle", "du", "Parc", "des", "Princes", "."]
    assert sentence.tags == ["O", "O", "B-LOC", "I-LOC", "I-LOC", "I-LOC", "O"]


DOC_COMMANDS = [
    "python -m ner_app convert export.jsonl --from doccano --output mine/train.txt",
    "python -m ner_app convert ann/ --from brat --output mine/valid.txt --labels Organization=ORG,Person=PER "
    "--types ORG,PER --strict",
]


def test_documented_commands(tmp_path):
    """docs/data.md's two commands, run as written in a folder holding a doccano export and a brat folder."""
    import os
    import shlex
    import subprocess
    import sys

    (doccano,) = write_doccano(tmp_path)
    doccano.rename(tmp_path / "export.jsonl")
    ann = tmp_path / "ann"
    ann.mkdir()
    (ann / "a.txt").write_text("Sony hired Alice Smith in Paris.", encoding="utf-8")
    (ann / "a.ann").write_text(  # Location is left out by --types, which --strict accepts
        "T1\tOrganization 0 4\tSony\nT2\tPerson 11 22\tAlice Smith\nT3\tLocation 26 31\tParis\n",
        encoding="utf-8",
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    for command in DOC_COMMANDS:
        argv = [sys.executable, *shlex.split(command)[1:]]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert [(s.tokens, s.tags) for s in read_conll(tmp_path / "mine/train.txt")] == [
        (t, g) for t, g, _ in expected(tmp_path)
    ]
    (sentence,) = read_conll(tmp_path / "mine/valid.txt")
    assert sentence.tags == ["B-ORG", "O", "B-PER", "I-PER", "O", "O", "O"]


@pytest.mark.parametrize(("choice", "kind"), [("first", "ORG"), ("last", "LOC"), ("latest", "PER")])
def test_label_studio_annotation_choice(tmp_path, choice, kind):
    """Three annotations of one task (and a cancelled one): --annotation picks first, last or latest."""

    def annotation(label: str, updated: str, cancelled: bool = False) -> dict[str, object]:
        value = {"start": 0, "end": 4, "text": "Sony", "labels": [label]}
        return {
            "result": [{"type": "labels", "value": value}],
            "was_cancelled": cancelled,
            "updated_at": updated,
        }

    task = {
        "id": 1,
        "data": {"text": "Sony"},
        "annotations": [
            annotation("ORG", "2024-01-01T00:00:00Z"),
            annotation("PER", "2024-03-01T00:00:00Z"),
            annotation("LOC", "2024-02-01T00:00:00Z"),
            annotation("MISC", "2025-01-01T00:00:00Z", cancelled=True),
        ],
    }
    path = tmp_path / "ls.json"
    path.write_text(json.dumps([task]), encoding="utf-8")
    out = tmp_path / "out.conll"
    assert main(["convert", str(path), "--output", str(out), "--annotation", choice]) == 0
    assert read_conll(out)[0].tags == [f"B-{kind}"]


def test_a_bom_and_crlf_line_ends_are_read(tmp_path):
    """Windows tools write a byte-order mark and CRLF line ends: the offsets still count code points of the text."""
    want = expected(tmp_path)
    (doccano,) = write_doccano(tmp_path)
    doccano.write_bytes(b"\xef\xbb\xbf" + doccano.read_bytes().replace(b"\n", b"\r\n"))
    out = tmp_path / "out.conll"
    assert main(["convert", str(doccano), "--output", str(out), "--strict"]) == 0
    assert sentences_of(out) == want


def test_label_studio_offsets_in_utf16_code_units(tmp_path, capsys):
    """Label Studio's front end counts an emoji as two code units; the span's text says which reading is meant."""
    text = "\U0001f680 Sony and \U0001f4a9 Paris"
    units = {"Sony": (3, 7), "Paris": (15, 20)}  # JavaScript's String offsets
    result = [
        {"type": "labels", "value": {"start": a, "end": b, "text": t, "labels": ["X"]}}
        for t, (a, b) in units.items()
    ]
    path = tmp_path / "ls.json"
    path.write_text(
        json.dumps([{"id": 1, "data": {"text": text}, "annotations": [{"result": result}]}]), encoding="utf-8"
    )
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), "--output", str(out), "--strict"]) == 0
    (record,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [e["text"] for e in record["entities"]] == ["Sony", "Paris"]
    assert "2 spans whose offsets count UTF-16 code units (read as such)" in capsys.readouterr().out


def test_label_studio_json_min(tmp_path):
    """Label Studio's JSON-MIN export: the text and the regions at the top of each task."""
    want = expected(tmp_path)
    tasks = [
        {
            "id": 5 + i,
            "text": text,
            "annotator": 1,
            "annotation_id": 9,
            "label": [
                {"start": s, "end": e, "text": text[s:e], "labels": [kind]} for s, e, kind in offsets(i)
            ],
        }
        for i, text in enumerate(DOCS)
    ]
    path = tmp_path / "min.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    out = tmp_path / "out.conll"
    assert main(["convert", str(path), "--output", str(out), "--strict"]) == 0
    assert sentences_of(out) == want
