"""Label Studio's task semantics, on export files written here from its public schema (the JSON export: tasks with
``annotations`` holding ``result``, ``was_cancelled``, ``ground_truth``, ``created_at``, ``updated_at``,
``lead_time``; JSON-MIN: one record an annotation with ``id``, ``annotator``, ``annotation_id``, ...): skipped
and unannotated tasks left out and counted, ground truth first, a text in several records read once, and
check-data placing each sentence by its task."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from ner_app.cli.commands import main
from ner_app.text.annotations.labelstudio import read_labelstudio
from ner_app.text.annotations.model import DISAGREE, MERGED, SKIPPED, UNANNOTATED, Audit
from ner_app.text.annotations.splits import read_split
from ner_app.text.conll import read_conll

MERKEL = "Angela Merkel met Sony in Berlin."
PHONE = "The iPhone sold well."
BOB = "Bob went home."


def region(text: str, part: str, label: str) -> dict[str, Any]:
    start = text.index(part)
    return {"start": start, "end": start + len(part), "text": part, "labels": [label]}


def annotation(ident: int, text: str, spans: list[tuple[str, str]], **fields: Any) -> dict[str, Any]:
    """An annotation as the JSON export writes it (fields as in Label Studio's task format)."""
    result = [
        {
            "id": f"r{k}",
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": region(text, p, t),
        }
        for k, (p, t) in enumerate(spans)
    ]
    return {
        "id": ident,
        "result": result,
        "was_cancelled": False,
        "ground_truth": False,
        "created_at": "2024-01-01T10:00:00.000000Z",
        "updated_at": "2024-01-01T10:00:00.000000Z",
        "lead_time": 4.2,
        "task": 0,
        "completed_by": 1,
        **fields,
    }


def task(ident: int, text: str, annotations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": ident, "data": {"text": text}, "annotations": annotations, "predictions": [], "project": 3}


def export(tmp_path: Path) -> Path:
    """Task 1: a 3-span ground truth and a newer 1-span annotation; task 2 skipped; task 3 never annotated;
    tasks 4 and 5: the same text, annotated alike."""
    tasks = [
        task(
            1,
            MERKEL,
            [
                annotation(
                    11,
                    MERKEL,
                    [("Angela Merkel", "PER"), ("Sony", "ORG"), ("Berlin", "LOC")],
                    ground_truth=True,
                ),
                annotation(12, MERKEL, [("Angela Merkel", "PER")], updated_at="2024-05-01T10:00:00.000000Z"),
            ],
        ),
        task(2, PHONE, [annotation(21, PHONE, [], was_cancelled=True)]),
        task(3, "Nobody looked at this.", []),
        task(4, BOB, [annotation(41, BOB, [("Bob", "PER")])]),
        task(5, BOB, [annotation(51, BOB, [("Bob", "PER")])]),
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks, indent=2), encoding="utf-8")
    return path


def json_min(tmp_path: Path) -> Path:
    """JSON-MIN: task 1 annotated twice (two records, Merkel as PER and as ORG), Bob's text in two tasks."""

    def record(ident: int, text: str, spans: list[tuple[str, str]], ann: int, updated: str) -> dict[str, Any]:
        return {
            "text": text,
            "id": ident,
            "label": [region(text, p, t) for p, t in spans],
            "annotator": "a@example.com",
            "annotation_id": ann,
            "created_at": updated,
            "updated_at": updated,
            "lead_time": 3.5,
        }

    records = [
        record(1, MERKEL, [("Angela Merkel", "PER")], 12, "2024-05-01T10:00:00Z"),
        record(1, MERKEL, [("Angela Merkel", "ORG")], 11, "2024-01-01T10:00:00Z"),
        record(4, BOB, [("Bob", "PER")], 41, "2024-01-01T10:00:00Z"),
        record(5, BOB, [("Bob", "PER")], 51, "2024-01-01T10:00:00Z"),
    ]
    path = tmp_path / "min.json"
    path.write_text(json.dumps(records, indent=2), encoding="utf-8")
    return path


def read(path: Path, choice: str = "first", keep: bool = False) -> tuple[list[tuple[str, list[str]]], Audit]:
    audit = Audit()
    docs = list(read_labelstudio(path, audit, choice, keep))
    return [(d.where, [d.text[s.start : s.end] + "/" + s.type for s in d.spans]) for d in docs], audit


@pytest.mark.parametrize("choice", ["first", "last", "latest"])
def test_ground_truth_wins_and_unannotated_tasks_are_left_out(tmp_path, choice):
    path = export(tmp_path)
    docs, audit = read(path, choice)
    assert docs == [
        (
            f"{path}:task 1",
            ["Angela Merkel/PER", "Sony/ORG", "Berlin/LOC"],
        ),  # the ground truth, whatever the rule
        (f"{path}:task 4", ["Bob/PER"]),  # task 5, the same text and spans, merged into it
    ]
    assert audit.records == {
        SKIPPED: [f"{path}:task 2"],
        UNANNOTATED: [f"{path}:task 3"],
        MERGED: [f"{path}:task 5"],
    }
    assert audit.counts["Label Studio tasks with several annotations (the ground truth used)"] == 1


def test_without_ground_truth_the_rule_chooses(tmp_path):
    path = export(tmp_path)
    tasks = json.loads(path.read_text(encoding="utf-8"))
    tasks[0]["annotations"][0]["ground_truth"] = False
    path.write_text(json.dumps(tasks), encoding="utf-8")
    assert read(path, "latest")[0][0] == (f"{path}:task 1", ["Angela Merkel/PER"])  # updated in May
    assert read(path, "first")[0][0][1] == ["Angela Merkel/PER", "Sony/ORG", "Berlin/LOC"]


def test_keep_unannotated_reads_them_as_text_without_entities(tmp_path):
    path = export(tmp_path)
    docs, audit = read(path, keep=True)
    assert docs[1:3] == [(f"{path}:task 2", []), (f"{path}:task 3", [])]
    assert audit.records_summary(True, "--keep-unannotated") == (
        "2 Label Studio tasks read as text without entities: 1 skipped (every annotation cancelled), 1 not "
        "annotated (--keep-unannotated); 1 duplicate records merged (the same text and annotation)"
    )


def test_json_min_records_of_one_text_are_read_once(tmp_path):
    """Two JSON-MIN records of task 1 disagree (PER, ORG): named in one line, read once by the rule."""
    path = json_min(tmp_path)
    for choice, used, label in (("first", 12, "PER"), ("last", 11, "ORG"), ("latest", 12, "PER")):
        docs, audit = read(path, choice)
        assert docs == [(f"{path}:task 1", [f"Angela Merkel/{label}"]), (f"{path}:task 4", ["Bob/PER"])]
        assert audit.records[DISAGREE] == [
            f"{path}:task 1: the same text in 2 records with different annotations (task 1 annotation 12, "
            f"task 1 annotation 11); used task 1 annotation {used}, the {choice}"
        ]
        assert audit.records[MERGED] == [f"{path}:task 5"]


def test_convert_names_and_counts_what_it_left_out(tmp_path, capsys):
    out = tmp_path / "out.conll"
    assert main(["convert", str(export(tmp_path)), "--output", str(out), "--annotation", "latest"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("2 documents, 2 sentences, 11 tokens, 4 entities;")
    assert (
        "; 2 Label Studio tasks left out: 1 skipped (every annotation cancelled), 1 not annotated "
        "(--keep-unannotated reads them as text without entities); 1 duplicate records merged" in summary
    )
    assert [s.tokens[0] for s in read_conll(out)] == ["Angela", "Bob"]
    assert main(["convert", str(json_min(tmp_path)), "--output", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].endswith("used task 1 annotation 12, the first")
    assert "1 texts in several records with different annotations (one used, named above)" in lines[-1]


def test_an_export_of_only_skipped_tasks_says_so(tmp_path, capsys):
    path = tmp_path / "skipped.json"
    path.write_text(
        json.dumps([task(2, PHONE, [annotation(21, PHONE, [], was_cancelled=True)])]), encoding="utf-8"
    )
    assert main(["convert", str(path), "--output", str(tmp_path / "o.conll")]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: no document to convert (1 Label Studio tasks left out: 1 skipped" in err
    assert not (tmp_path / "o.conll").exists()


def splits(folder: Path, train: list[dict[str, Any]], dev: list[dict[str, Any]]) -> Path:
    folder.mkdir()
    for name, tasks in (("train", train), ("valid", dev), ("test", dev)):
        (folder / f"{name}.json").write_text(json.dumps(tasks), encoding="utf-8")
    return folder


def test_check_data_places_sentences_by_task_and_counts_tasks(tmp_path, capsys):
    path = export(tmp_path)
    dev = [task(12, BOB, [annotation(1, BOB, [("Bob", "PER")])]), task(13, PHONE, [])]
    folder = splits(tmp_path / "data", json.loads(path.read_text(encoding="utf-8")), dev)
    assert main(["check-data", str(folder), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    train, test = found["splits"]["train"], found["splits"]["test"]
    assert train["longest"] == [
        {"tokens": 7, "at": f"{folder}/train.json:task 1"},
        {"tokens": 4, "at": f"{folder}/train.json:task 4"},
    ]
    assert train["records"] == {
        "skipped": 1,
        "not_annotated": 1,
        "left_out": 2,
        "kept_as_no_entities": 0,
        "unannotated_at": [f"{folder}/train.json:task 2", f"{folder}/train.json:task 3"],
        "duplicates_merged": 1,
        "disagreeing_texts": 0,
        "disagreeing": [],
    }
    assert test["records"]["not_annotated"] == 1 and test["sentences"] == 1
    problems = {(p["split"], p["kind"]): p for p in found["problems"]}
    assert problems["dev", "leakage"]["examples"] == [f"{folder}/valid.json:task 12"]  # not valid.json:1
    assert problems["train", "tasks left out"]["examples"] == [
        f"{folder}/train.json:task 2",
        f"{folder}/train.json:task 3",
    ]

    assert main(["check-data", str(folder), "--keep-unannotated"]) == 0
    out = capsys.readouterr().out
    assert "tasks kept, no entities" in out and f"  {folder}/valid.json:task 12" in out
    assert (
        "warning: train: tasks trained as no entities: 2 Label Studio tasks without an annotation are read as "
        "text without entities (--keep-unannotated)" in out
    )


def test_check_data_names_disagreeing_records(tmp_path, capsys):
    records = json.loads(json_min(tmp_path).read_text(encoding="utf-8"))
    folder = splits(tmp_path / "data", records, records[2:3])
    assert main(["check-data", str(folder), "--json", "--annotation", "last"]) == 0
    found = json.loads(capsys.readouterr().out)
    problem = next(p for p in found["problems"] if p["kind"] == "disagreeing records")
    assert problem["split"] == "train" and problem["examples"] == [
        f"{folder}/train.json:task 1: the same text in 2 records with different annotations (task 1 annotation 12, "
        "task 1 annotation 11); used task 1 annotation 11, the last"
    ]
    assert found["splits"]["train"]["entities"] == {"ORG": 1, "PER": 1}  # Merkel once, as ORG; Bob once


def test_training_reads_and_logs_without_the_left_out_tasks(tmp_path, caplog):
    """What training reads (``read_split`` without an audit): no sentence of the skipped task, and one log line
    counting it; with ``keep_unannotated`` its sentence is there, without entities."""
    from ner_app.train.corpus import reading_options

    path = export(tmp_path)
    with caplog.at_level(logging.WARNING, logger="ner_app"):
        sentences = read_split(path, "labelstudio", options=reading_options())
    assert [s.tokens[0] for s in sentences] == ["Angela", "Bob"]
    assert [s.where for s in sentences] == [f"{path}:task 1", f"{path}:task 4"]
    assert (
        f"{path}: 2 Label Studio tasks left out: 1 skipped (every annotation cancelled), 1 not annotated "
        "(data.keep_unannotated: true reads them as text without entities)" in caplog.text
    )
    kept = read_split(path, "labelstudio", options=reading_options(keep_unannotated=True))
    assert [(s.tokens[1], set(s.tags)) for s in kept[1:3]] == [("iPhone", {"O"}), ("looked", {"O"})]
