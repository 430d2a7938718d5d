"""Label Studio: the JSON export of a text (named-entity) project read, tasks with predictions written
(``predict --format labelstudio``, https://labelstud.io/guide/predictions), and its format record.

The file is a JSON list of tasks: ``{"id", "data": {"text": ...}, "annotations": [{"result": [...],
"was_cancelled", ...}]}``; a span is a result of type ``labels`` whose ``value`` holds ``start``, ``end``,
``text`` and ``labels``. Cancelled (skipped) annotations are not read; which annotation a text is read
from, and which tasks are left out, is ``labelstudio_tasks.py``'s. A task with no ``annotations`` key but
``predictions`` (a file of pre-annotations to import, such as ``predict --format labelstudio`` writes; an
export always has the key) is read from its first prediction. The JSON-MIN export (one object an annotation:
``text``, ``id`` (the task's), ``annotator``, ``annotation_id``, ``created_at``, ``updated_at``, ``lead_time``
and, under the labels control's name, its regions ``{start, end, text, labels}``) is read too.

What ``predict --format labelstudio`` writes is one JSON list of tasks ``{"data": {"text"}, "predictions":
[{"model_version", "score", "result": [{"id", "from_name", "to_name", "type": "labels", "value": {"start",
"end", "text", "labels"}, "score"}]}]}`` for the named-entity template (``<Labels name="label"
toName="text">``), a task a document (a block of non-empty input lines). ``model_version`` names the model
(its folder and a short hash of its weights). With ``--alternatives`` a region's ``meta.text`` (the note Label
Studio shows with a region) lists its other readings; with ``--flag-missed`` the task's ``data.flagged`` (a
column of the Data Manager) lists the flagged tokens: neither is a region, which an annotator would have to
delete.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.labelstudio_tasks import Candidate, Record, Region, choose, moment
from ner_app.text.annotations.model import (
    SKIPPED,
    UNANNOTATED,
    AnnotationFormatError,
    Audit,
    CharSpan,
    TextDocument,
)
from ner_app.text.annotations.read import char_span, load_json, need_flag, need_list, read_text, shown
from ner_app.text.outputs import ALTERNATIVES, FLAGGED, OutputFormat, Target
from ner_app.text.predictions import Entity, TaggedLine, documents

CHOICES = ("first", "last", "latest")  # which annotation of a task with several is read (``annotation``)
FROM_NAME, TO_NAME = "label", "text"  # the control and object names of Label Studio's named-entity template
# data keys of projects of other types (what a task of an image, audio, video or HTML project holds)
_MEDIA = {"image", "audio", "video", "url", "html", "hypertext", "pdf", "timeseries", "paragraphs"}
# results that go with text spans in a named-entity project and hold no span themselves
_BESIDE_SPANS = {"relation", "choices", "textarea", "rating", "taxonomy", "number", "datetime"}


def read_labelstudio(
    path: str | os.PathLike[str], audit: Audit, choice: str = "first", keep_unannotated: bool = False
) -> Iterator[TextDocument]:
    """The documents of an export, one a distinct text (``labelstudio_tasks.choose``)."""
    name = os.fspath(path)
    text = read_text(path).removeprefix("\ufeff")
    try:
        tasks = load_json(text, name)
    except json.JSONDecodeError as err:
        raise AnnotationFormatError(
            f"{name}:{err.lineno}: not valid JSON ({err.msg}); expected Label Studio's JSON export (a list of tasks)"
        ) from None
    except RecursionError:
        raise AnnotationFormatError(f"{name}: JSON nested too deeply") from None
    if isinstance(tasks, dict):  # a single task
        tasks = [tasks]
    if not isinstance(tasks, list):
        raise AnnotationFormatError(f"{name}: expected a JSON list of tasks (Label Studio's JSON export)")
    if not tasks:
        raise AnnotationFormatError(f"{name}: empty export: no tasks in it")
    # the tasks of the JSON export by id (a JSON-MIN record is one annotation: its task's records share an id)
    ids = Counter(str(t.get("id")) for t in tasks if isinstance(t, dict) and "id" in t and "data" in t)
    records = []
    for index, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise AnnotationFormatError(
                f"{name}: task {index + 1}: expected an object with 'data' and 'annotations'"
            )
        task_name = f"task {task.get('id', index + 1)}"
        # an id several tasks share does not say which: their place in the file does
        if "data" in task and ids[str(task.get("id"))] > 1:
            task_name += f" (#{index + 1} in the file)"
        records.append(_record(task, f"{name}:{task_name}", task_name, audit, choice == "latest"))
    for record, chosen in choose(records, choice, keep_unannotated, audit):
        spans = [] if chosen is None else _spans(record, chosen, audit)
        yield TextDocument(record.where, record.text, spans)


def _task_text(task: dict[str, Any], where: str) -> str:
    data = task.get("data")
    if not isinstance(data, dict):
        raise AnnotationFormatError(f"{where}: no 'data' object; expected a Label Studio task")
    if isinstance(data.get("text"), str):
        return str(data["text"])
    if "text" in data:
        raise AnnotationFormatError(f"{where}: expected a string data.text, found {shown(data['text'])}")
    strings = [v for k, v in data.items() if isinstance(v, str) and k not in _MEDIA]
    if len(strings) != 1:
        raise AnnotationFormatError(
            f"{where}: expected the task's text in data.text (keys found: {', '.join(sorted(data))[:60]}); "
            "is this a project of another type (images, audio, HTML)?"
        )
    return strings[0]


def _stamp(annotation: dict[str, Any], where: str, timed: bool) -> str:
    """``updated_at``, else ``created_at``, as a UTC time that compares as it should (``moment``); "" when
    there is neither. When the times decide (``timed``: ``latest``), one that is not an ISO 8601 time is an
    error naming the task; otherwise it is not read."""
    raw = annotation.get("updated_at") or annotation.get("created_at")
    if raw is None or raw == "":
        return ""
    found = moment(raw) if isinstance(raw, str) else None
    if found is None and timed:
        raise AnnotationFormatError(
            f"{where}: expected an ISO 8601 time in updated_at or created_at (2024-05-01T12:00:00.123Z), found "
            f"{shown(raw)}"
        )
    return found or ""


def _record(task: dict[str, Any], where: str, task_name: str, audit: Audit, timed: bool = False) -> Record:
    """A task of the JSON export (or a record of JSON-MIN) at ``where`` (``FILE:task 12``) and the annotations
    it may be read from."""
    if "data" not in task and isinstance(task.get("text"), str):
        return _json_min(task, where, task_name, timed)
    text = _task_text(task, where)
    if "annotations" not in task and "predictions" in task:  # an import file of pre-annotations
        audit.note("Label Studio tasks without annotations read from their first prediction")
        predictions = need_list(task["predictions"], where, "predictions")
        first = predictions[0] if predictions and isinstance(predictions[0], dict) else None
        if first is None:
            return Record(where, text, (), UNANNOTATED)
        regions = _regions(first.get("result"), where)
        return Record(where, text, (Candidate(f"{task_name} prediction 1", False, "", regions),))
    annotations = need_list(task.get("annotations", []), where, "annotations")
    if not all(isinstance(a, dict) for a in annotations):
        raise AnnotationFormatError(f"{where}: expected annotation objects with a 'result' list")
    kept = []
    for number, annotation in enumerate(annotations, start=1):
        name = f"{task_name} annotation {annotation.get('id', number)}"
        cancelled = need_flag(
            annotation.get("was_cancelled"), f"{where}, annotation {number}", "was_cancelled"
        )
        truth = need_flag(annotation.get("ground_truth"), f"{where}, annotation {number}", "ground_truth")
        if cancelled:
            continue
        regions = _regions(annotation.get("result"), where)
        kept.append(
            Candidate(name, truth, _stamp(annotation, f"{where}, annotation {number}", timed), regions)
        )
    if len(kept) < len(annotations):
        audit.note("cancelled Label Studio annotations skipped", len(annotations) - len(kept))
    if not kept:
        return Record(where, text, (), SKIPPED if annotations else UNANNOTATED)
    return Record(where, text, tuple(kept))


def _regions(result: Any, where: str) -> tuple[Region, ...]:
    """The labelled spans of an annotation's ``result`` (other results of a named-entity project skipped)."""
    regions = []
    for item in need_list(result, where, "result"):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in _BESIDE_SPANS:
            continue
        if kind != "labels" or not isinstance(item.get("value"), dict):
            raise AnnotationFormatError(
                f"{where}: a result of type {kind!r}; expected text spans (type 'labels' with value start, end, "
                "labels): is this an export of another project type?"
            )
        value = item["value"]
        labels = need_list(value.get("labels"), where, "value.labels")
        if not labels:
            raise AnnotationFormatError(f"{where}: a span with an empty 'labels' list; expected its type")
        # a region with two labels gives two spans; the overlap policy keeps one
        regions += [
            Region(value.get("start"), value.get("end"), label, value.get("text")) for label in labels
        ]
    return tuple(regions)


def _json_min(task: dict[str, Any], where: str, task_name: str, timed: bool) -> Record:
    """A record of the JSON-MIN export: the text at the top, each labels control's regions under its name,
    and the one annotation it holds (``annotation_id``, ``created_at``, ``updated_at``)."""
    regions = []
    for value in task.values():
        for region in value if isinstance(value, list) else []:
            if isinstance(region, dict) and "labels" in region and "start" in region:
                regions += [
                    Region(region.get("start"), region.get("end"), label, region.get("text"))
                    for label in need_list(region["labels"], where, "labels")
                ]
    name = f"{task_name} annotation {task['annotation_id']}" if "annotation_id" in task else task_name
    return Record(
        where, str(task["text"]), (Candidate(name, False, _stamp(task, where, timed), tuple(regions)),)
    )


def _spans(record: Record, chosen: Candidate, audit: Audit) -> list[CharSpan]:
    """The chosen annotation's regions as checked spans of the record's text (dropped ones audited)."""
    spans = []
    for r in chosen.regions:
        span = char_span(record.text, r.start, r.end, r.label, record.where, audit, r.claimed)
        if span is not None:
            spans.append(span)
    return spans


def _labelstudio_region(n: int, e: Entity) -> dict[str, object]:
    region: dict[str, object] = {
        "id": f"e{n}",
        "from_name": FROM_NAME,
        "to_name": TO_NAME,
        "type": "labels",
        "value": {"start": e.start, "end": e.end, "text": e.text, "labels": [e.type]},
        "score": e.score,
    }
    if e.alternatives:  # the region's meta text, which Label Studio shows with the region
        region["meta"] = {"text": [f"other readings: {e.alternatives_text()}"]}
    return region


def _labelstudio_task(record: TaggedLine, target: Target) -> dict[str, object]:
    result = [_labelstudio_region(n, e) for n, e in enumerate(record.entities, start=1)]
    prediction: dict[str, object] = {"model_version": target.model_version, "result": result}
    if record.entities:  # the least certain entity: sorting by it puts the tasks to review first
        prediction["score"] = min(e.score for e in record.entities)
    data: dict[str, object] = {"text": record.text}
    if record.flagged is not None:  # task data: a column of the Data Manager, not a region to accept
        data["flagged"] = [f.to_json() for f in record.flagged]
    return {"data": data, "predictions": [prediction]}


def write_labelstudio(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One JSON list, a task a document (a block of non-empty lines), streamed: ``[``, the tasks separated by
    commas, ``]``."""
    yield "["
    for n, record in enumerate(documents(records)):
        yield ("," if n else "") + "\n" + json.dumps(_labelstudio_task(record, target), ensure_ascii=False)
    yield "\n]\n"


def _read(path: Path, options: Options, audit: Audit) -> Iterator[TextDocument]:
    return read_labelstudio(path, audit, options.annotation, options.keep_unannotated)


def _detect(probe: Probe) -> bool:
    return probe.path.suffix == ".json"  # the name alone: its reader names what is wrong inside


FORMAT = Format(
    "labelstudio",
    suffixes=(".json",),
    detect=_detect,
    precedence=30,
    clue="the name NAME.json",
    read=_read,
    spans=True,
    writer=OutputFormat(
        "labelstudio",
        "text",
        write_labelstudio,
        "Label Studio tasks with predictions (a JSON list, a task per document: a block of non-empty lines; "
        "from_name label, to_name text), to review",
        documents=True,
        carries=frozenset({ALTERNATIVES, FLAGGED}),
    ),
    options=("annotation", "keep_unannotated"),
)
