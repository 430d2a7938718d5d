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
from ner_app.text.predictions import Entity, TaggedLine
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
    """brat documents (blocks of lines) cut back into lines, offsets made relative to each line."""
    out = []
    for text, spans in docs:
        at = 0
        for part in text.removesuffix("\n").split("\n"):
            out.append((part, [(s - at, e - at, k) for s, e, k in spans if at <= s < at + len(part) + 1]))
            at += len(part) + 1
    return out


def test_doccano_is_its_sequence_labelling_import(tmp_path):
    path = write_output(tmp_path / "pre.jsonl", FORMATS["doccano"], RECORDS, TARGET)
    tasks = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert all(set(t) == {"text", "label"} for t in tasks)
    assert tasks[0] == {"text": RECORDS[0].text, "label": [[0, 13, "PER"], [22, 27, "LOC"]]}
    assert converted_back(tmp_path, "doccano", path) == predicted()


def test_label_studio_is_a_list_of_tasks_with_predictions(tmp_path):
    path = write_output(tmp_path / "pre.json", FORMATS["labelstudio"], RECORDS, TARGET)
    tasks = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(tasks, list) and len(tasks) == len(RECORDS)
    first = tasks[0]
    assert first["data"] == {"text": RECORDS[0].text} and "annotations" not in first
    (prediction,) = first["predictions"]
    assert prediction["model_version"] == "my-model" and prediction["score"] == 0.9  # the least certain
    result = prediction["result"][0]
    assert {k: result[k] for k in ("from_name", "to_name", "type")} == {
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
    }
    assert result["value"] == {"start": 0, "end": 13, "text": "Angela Merkel", "labels": ["PER"]}
    assert len({r["id"] for r in prediction["result"]}) == 2  # region ids are unique in a task
    assert "score" not in tasks[3]["predictions"][0]  # no entity, no certainty to report
    assert converted_back(tmp_path, "labelstudio", path) == predicted()


def test_prodigy_has_tokens_and_inclusive_token_ends(tmp_path):
    path = write_output(tmp_path / "pre.jsonl", FORMATS["prodigy"], RECORDS, TARGET)
    tasks = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    first = tasks[0]
    assert set(first) == {"text", "tokens", "spans"}  # no answer: the annotator gives it
    assert [t["text"] for t in first["tokens"]] == [t.text for t in tokenize(RECORDS[0].text)]
    assert first["tokens"][0] == {"text": "Angela", "start": 0, "end": 6, "id": 0, "ws": True}
    assert first["tokens"][-1]["ws"] is False  # the final period
    assert first["spans"][0] == {"start": 0, "end": 13, "token_start": 0, "token_end": 1, "label": "PER"}
    for task in tasks:
        for span in task["spans"]:
            tokens = task["tokens"]
            assert tokens[span["token_start"]]["start"] == span["start"]
            assert tokens[span["token_end"]]["end"] == span["end"]
    assert converted_back(tmp_path, "prodigy", path) == predicted()


def test_brat_is_a_folder_of_documents(tmp_path):
    folder = write_output(tmp_path / "brat", FORMATS["brat"], RECORDS, TARGET)
    names = sorted(p.name for p in folder.iterdir())
    # two documents: the lines before the blank line, and the two after it
    assert names == ["annotation.conf", "doc000001.ann", "doc000001.txt", "doc000002.ann", "doc000002.txt"]
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
    assert per_line(docs) == [p for p in predicted() if p[0]]  # the blank line belongs to no document

    # written again, it replaces its own folder
    write_output(folder, FORMATS["brat"], RECORDS[:1], TARGET)
    assert sorted(p.name for p in folder.iterdir()) == ["annotation.conf", "doc000001.ann", "doc000001.txt"]


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
    assert (per_line(back) if fmt == "brat" else back) == (
        [w for w in want if w[0]] if fmt == "brat" else want
    )


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
