"""Predictions as pre-annotations of annotation tools (``predict --format doccano|labelstudio|prodigy|brat``):
each file has the shape its tool's public schema gives (checked field by field here), and ``convert --from``
the same format gives back exactly the predicted entities, for every format (with the shipped tagger too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.report.formats import FORMATS, Target, write_output
from ner_app.text.conll import read_conll
from ner_app.text.predictions import Entity, Flagged, TaggedLine
from ner_app.text.tags import detect_scheme, entities
from ner_app.text.tokenizer import tokenize


def line(text: str, *found: tuple[str, str, float]) -> TaggedLine:
    """A record whose entities are found left to right by their text."""
    spans, at = [], 0
    for surface, kind, score in found:
        start = text.index(surface, at)
        spans.append(Entity(start, start + len(surface), kind, surface, score))
        at = start + len(surface)
    return TaggedLine(text, tuple(spans))


RECORDS = [
    line("Angela Merkel visited Paris on Monday.", ("Angela Merkel", "PER", 0.99), ("Paris", "LOC", 0.9)),
    line(
        "\U0001f600 Sony bought Columbia Pictures.", ("Sony", "ORG", 0.8), ("Columbia Pictures", "ORG", 0.7)
    ),
    line(""),
    line("Nothing here."),
    line("Alice Smith lives in New York.", ("Alice Smith", "PER", 0.95), ("New York", "LOC", 0.97)),
    line(
        "Columns:\tNew\tYork\there.", ("New\tYork", "LOC", 0.6)
    ),  # a tab inside an entity: brat's text field
]
TARGET = Target(("LOC", "ORG", "PER"), "news.txt", "my-model")


def predicted() -> list[tuple[str, list[tuple[int, int, str]]]]:
    return [(r.text, [(e.start, e.end, e.type) for e in r.entities]) for r in RECORDS]


def converted_back(tmp_path: Path, fmt: str, written: Path) -> list[tuple[str, list[tuple[int, int, str]]]]:
    back = tmp_path / f"back_{fmt}.jsonl"
    assert main(["convert", str(written), "--from", fmt, "--output", str(back), "--strict"]) == 0
    docs = [json.loads(x) for x in back.read_text(encoding="utf-8").splitlines()]
    return [(d["text"], [(e["start"], e["end"], e["type"]) for e in d["entities"]]) for d in docs]


def per_line(
    docs: list[tuple[str, list[tuple[int, int, str]]]],
) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """Documents (blocks of lines: a tool's task, a brat file) cut back into lines, offsets made relative to
    each line."""
    out = []
    for text, spans in docs:
        at = 0
        for part in text.removesuffix("\n").split("\n"):
            out.append((part, [(s - at, e - at, k) for s, e, k in spans if at <= s < at + len(part) + 1]))
            at += len(part) + 1
    return out


# every tool's task is a document: the lines before the blank line, and the three after it
FIRST = f"{RECORDS[0].text}\n{RECORDS[1].text}"
NON_BLANK = [p for p in predicted() if p[0]]  # the blank line belongs to no document


def test_doccano_is_its_sequence_labelling_import(tmp_path):
    path = write_output(tmp_path / "pre.jsonl", FORMATS["doccano"], RECORDS, TARGET)
    tasks = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert len(tasks) == 2 and all(set(t) == {"text", "label"} for t in tasks)
    second = len(RECORDS[0].text) + 1  # the second line's offsets count from the document's start
    assert tasks[0] == {
        "text": FIRST,
        "label": [
            [0, 13, "PER"],
            [22, 27, "LOC"],
            [second + 2, second + 6, "ORG"],
            [second + 14, second + 31, "ORG"],
        ],
    }
    assert per_line(converted_back(tmp_path, "doccano", path)) == NON_BLANK


def test_label_studio_is_a_list_of_tasks_with_predictions(tmp_path):
    path = write_output(tmp_path / "pre.json", FORMATS["labelstudio"], RECORDS, TARGET)
    tasks = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(tasks, list) and len(tasks) == 2  # no empty task for the blank line
    first = tasks[0]
    assert first["data"] == {"text": FIRST} and "annotations" not in first
    (prediction,) = first["predictions"]
    assert prediction["model_version"] == "my-model" and prediction["score"] == 0.7  # the least certain
    result = prediction["result"][0]
    assert {k: result[k] for k in ("from_name", "to_name", "type")} == {
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
    }
    assert result["value"] == {"start": 0, "end": 13, "text": "Angela Merkel", "labels": ["PER"]}
    assert len({r["id"] for r in prediction["result"]}) == 4  # region ids are unique in a task
    assert all("meta" not in r for r in prediction["result"])  # no other readings asked for
    nothing = write_output(tmp_path / "none.json", FORMATS["labelstudio"], [line("Nothing here.")], TARGET)
    assert "score" not in json.loads(nothing.read_text(encoding="utf-8"))[0]["predictions"][0]  # no entity
    assert per_line(converted_back(tmp_path, "labelstudio", path)) == NON_BLANK


def test_prodigy_has_tokens_and_inclusive_token_ends(tmp_path):
    path = write_output(tmp_path / "pre.jsonl", FORMATS["prodigy"], RECORDS, TARGET)
    tasks = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    first = tasks[0]
    assert len(tasks) == 2 and set(first) == {"text", "tokens", "spans"}  # no answer: the annotator gives it
    assert first["text"] == FIRST
    words = [t.text for r in RECORDS[:2] for t in tokenize(r.text)]
    assert [t["text"] for t in first["tokens"]] == words
    assert first["tokens"][0] == {"text": "Angela", "start": 0, "end": 6, "id": 0, "ws": True}
    assert first["tokens"][-1]["ws"] is False  # the final period
    assert first["spans"][0] == {"start": 0, "end": 13, "token_start": 0, "token_end": 1, "label": "PER"}
    for task in tasks:
        for span in task["spans"]:
            tokens = task["tokens"]
            assert tokens[span["token_start"]]["start"] == span["start"]
            assert tokens[span["token_end"]]["end"] == span["end"]
    assert per_line(converted_back(tmp_path, "prodigy", path)) == NON_BLANK


def test_brat_is_a_folder_of_documents(tmp_path):
    folder = write_output(tmp_path / "brat", FORMATS["brat"], RECORDS, TARGET)
    names = sorted(p.name for p in folder.iterdir())
    # two documents: the lines before the blank line, and the two after it (and the marker of predict's output)
    assert names == [
        ".ner-app",
        "annotation.conf",
        "doc000001.ann",
        "doc000001.txt",
        "doc000002.ann",
        "doc000002.txt",
    ]
    text = (folder / "doc000001.txt").read_text(encoding="utf-8")
    assert text == f"{RECORDS[0].text}\n{RECORDS[1].text}\n"
    ann = (folder / "doc000001.ann").read_text(encoding="utf-8").splitlines()
    assert ann[:2] == ["T1\tPER 0 13\tAngela Merkel", "#1\tAnnotatorNotes T1\tscore 0.99"]
    for row in ann[::2]:  # every text-bound line points at its text
        _, head, surface = row.split("\t")
        _, start, end = head.split(" ")
        assert text[int(start) : int(end)] == surface
    assert "[entities]\nLOC\nORG\nPER\n" in (folder / "annotation.conf").read_text(encoding="utf-8")
    docs = converted_back(tmp_path, "brat", folder)
    assert per_line(docs) == NON_BLANK

    # written again, it replaces its own files, and removes those of its own it no longer writes
    write_output(folder, FORMATS["brat"], RECORDS[:1], TARGET)
    assert sorted(p.name for p in folder.iterdir()) == [
        ".ner-app",
        "annotation.conf",
        "doc000001.ann",
        "doc000001.txt",
    ]


# ------------------------------------------------------------------------------------ with the shipped tagger
LINES = [
    "Angela Merkel visited Paris on Monday.",
    "Sony bought Columbia Pictures in 1989. Alice Smith lives in New York.",
    "",
    "The U.S. Army said so, according to Reuters.",
]


@pytest.fixture(scope="module")
def shipped_predictions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    folder = tmp_path_factory.mktemp("shipped")
    news = folder / "news.txt"
    news.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = folder / "predicted.jsonl"
    assert main(["predict", "--input", str(news), "--threads", "1", "--output", str(out)]) == 0
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    want = [(r["text"], [(e["start"], e["end"], e["type"]) for e in r["entities"]]) for r in records]
    assert sum(len(s) for _, s in want) >= 6  # the tagger found the names: the comparison says something
    return news, want


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("doccano", "p.jsonl"), ("labelstudio", "p.json"), ("prodigy", "p.jsonl"), ("brat", "p")],
)
def test_predict_then_convert_gives_the_predicted_entities(shipped_predictions, tmp_path, fmt, name):
    news, want = shipped_predictions
    out = tmp_path / name
    assert (
        main(["predict", "--input", str(news), "--threads", "1", "--format", fmt, "--output", str(out)]) == 0
    )
    back = converted_back(tmp_path, fmt, out)
    assert per_line(back) == [w for w in want if w[0]]  # a task a document; a blank line is in none


def test_predict_conll_then_convert_gives_the_predicted_tags(tmp_path):
    tokens = [t.text for t in tokenize(LINES[0])] + [""] + [t.text for t in tokenize(LINES[3])]
    source = tmp_path / "tokens.conll"
    source.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    out = tmp_path / "tagged.conll"
    assert (
        main(["predict", "--input", str(source), "--format", "conll", "--threads", "1", "--output", str(out)])
        == 0
    )
    blocks = [b for b in out.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    predicted_tags = [[row.split()[-1] for row in block.splitlines()] for block in blocks]
    assert any(t != "O" for tags in predicted_tags for t in tags)  # the tagger found names
    back = tmp_path / "back.conll"
    assert main(["convert", str(out), "--from", "conll", "--output", str(back), "--strict"]) == 0
    scheme = detect_scheme(predicted_tags)  # the scheme of the training files, which predict writes
    assert [entities(s.tags, "IOB2") for s in read_conll(back)] == [
        entities(t, scheme) for t in predicted_tags
    ]


# ------------------------------------------------------------------------ other readings and flagged tokens
SONY = Entity(
    0, 4, "ORG", "Sony", 0.6, (Entity(0, 4, "MISC", "Sony", 0.3), Entity(0, 12, "ORG", "Sony\tbought", 0.05))
)
FLAG = Flagged(12, 20, "Columbia", 0.41, Entity(12, 20, "ORG", "Columbia", 0.5))
READ = [
    TaggedLine("Sony bought Columbia.", (SONY,), (FLAG,)),
    TaggedLine("Bob left.", (), ()),
]
SECOND = len(READ[0].text) + 1  # where the second line starts in the document


def test_label_studio_keeps_readings_beside_the_regions(tmp_path):
    path = write_output(tmp_path / "pre.json", FORMATS["labelstudio"], READ, TARGET)
    (task,) = json.loads(path.read_text(encoding="utf-8"))
    (region,) = task["predictions"][0]["result"]  # the other readings are no regions to delete
    assert region["meta"] == {"text": ['other readings: MISC "Sony" 0.3, ORG "Sony\\tbought" 0.05']}
    assert task["data"]["flagged"] == [FLAG.to_json()]
    assert task["data"]["text"] == "Sony bought Columbia.\nBob left."
    assert converted_back(tmp_path, "labelstudio", path) == [(task["data"]["text"], [(0, 4, "ORG")])]


def test_prodigy_keeps_readings_in_the_task_and_shows_them_in_meta(tmp_path):
    path = write_output(tmp_path / "pre.jsonl", FORMATS["prodigy"], READ, TARGET)
    (task,) = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert task["spans"][0]["alternatives"] == [a.to_json() for a in SONY.alternatives or ()]
    assert task["flagged"] == [FLAG.to_json()]
    assert task["meta"] == {
        'alternatives "Sony"': 'MISC "Sony" 0.3, ORG "Sony\\tbought" 0.05',
        "flagged": '"Columbia" (O 0.41): ORG "Columbia" 0.5',
    }
    assert [t["start"] for t in task["tokens"]][-3:] == [SECOND, SECOND + 4, SECOND + 8]  # the second line's
    assert converted_back(tmp_path, "prodigy", path) == [(task["text"], [(0, 4, "ORG")])]


def test_brat_notes_hold_the_other_readings(tmp_path):
    folder = write_output(tmp_path / "brat", FORMATS["brat"], READ, TARGET)
    ann = (folder / "doc000001.ann").read_text(encoding="utf-8").splitlines()
    assert ann == [
        "T1\tORG 0 4\tSony",
        '#1\tAnnotatorNotes T1\tscore 0.6; other readings: MISC "Sony" 0.3, ORG "Sony\\tbought" 0.05',
    ]


def test_the_formats_say_what_they_hold():
    holds = {name: sorted(f.carries) for name, f in FORMATS.items()}
    both = ["--alternatives", "--flag-missed"]
    assert holds == {
        "jsonl": both,
        "conll": [],
        "html": both,
        "doccano": [],
        "labelstudio": both,
        "prodigy": both,
        "brat": ["--alternatives"],
    }
    assert all(f.lacks for f in FORMATS.values() if len(f.carries) < 2 and f.reads == "text")


def test_predict_for_label_studio_names_the_model_and_keeps_its_readings(shipped_predictions, tmp_path):
    """A blank line between documents makes no task; model_version is the shipped model's folder and the
    weights' digest its tagger.json records; the other readings and flags asked for are in the file."""
    from ner_app.predict.shipped import SHIPPED_MODEL

    news, want = shipped_predictions
    out = tmp_path / "pre.json"
    asked = ["--alternatives", "2", "--flag-missed", "0.999"]
    assert (
        main(
            [
                "predict",
                "--input",
                str(news),
                "--threads",
                "1",
                "--format",
                "labelstudio",
                "--output",
                str(out),
                *asked,
            ]
        )
        == 0
    )
    tasks = json.loads(out.read_text(encoding="utf-8"))
    assert [t["data"]["text"] for t in tasks] == ["\n".join(LINES[:2]), LINES[3]]
    integrity = json.loads((SHIPPED_MODEL / "tagger.json").read_text(encoding="utf-8"))["integrity"]
    assert {t["predictions"][0]["model_version"] for t in tasks} == {
        f"conll2003-{integrity['weights_sha256'][:8]}"
    }
    assert all("flagged" in t["data"] for t in tasks)
    regions = [r for t in tasks for r in t["predictions"][0]["result"]]
    assert any("meta" in r for r in regions)  # an entity with another reading
    assert per_line(converted_back(tmp_path, "labelstudio", out)) == [w for w in want if w[0]]
