"""Label Studio: the JSON export of a text (named-entity) project read, tasks with predictions written
(``predict --format labelstudio``, https://labelstud.io/guide/predictions), and its format record.

The file is a JSON list of tasks: ``{"id", "data": {"text": ...}, "annotations": [{"result": [...],
"was_cancelled", ...}]}``; a span is a result of type ``labels`` whose ``value`` holds ``start``, ``end``,
``text`` and ``labels``. Cancelled (skipped) annotations are not read. When a task has several annotations,
``choice`` says which is used: ``first`` or ``last`` in the file, or ``latest`` (the newest ``updated_at``).
A task with no ``annotations`` key but ``predictions`` (a file of pre-annotations to import, such as
``predict --format labelstudio`` writes; an export always has the key) is read from its first prediction.
The JSON-MIN export (one object a task: ``text`` and, under the labels control's name, its regions
``{start, end, text, labels}``) is read too.

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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, need_list, read_text
from ner_app.text.outputs import ALTERNATIVES, FLAGGED, OutputFormat, Target
from ner_app.text.predictions import Entity, TaggedLine, documents

CHOICES = ("first", "last", "latest")  # which annotation of a task with several is read (``annotation``)
FROM_NAME, TO_NAME = "label", "text"  # the control and object names of Label Studio's named-entity template
# results that go with text spans in a named-entity project and hold no span themselves
# data keys of projects of other types (what a task of an image, audio, video or HTML project holds)
_MEDIA = {"image", "audio", "video", "url", "html", "hypertext", "pdf", "timeseries", "paragraphs"}
_BESIDE_SPANS = {"relation", "choices", "textarea", "rating", "taxonomy", "number", "datetime"}


def read_labelstudio(
    path: str | os.PathLike[str], audit: Audit, choice: str = "first"
) -> Iterator[TextDocument]:
    name = os.fspath(path)
    text = read_text(path).removeprefix("\ufeff")
    try:
        tasks = json.loads(text)
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
    for index, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise AnnotationFormatError(
                f"{name}: task {index + 1}: expected an object with 'data' and 'annotations'"
            )
        where = f"{name}:task {task.get('id', index + 1)}"
        yield _document(task, where, audit, choice)


def _task_text(task: dict[str, Any], where: str) -> str:
    data = task.get("data")
    if not isinstance(data, dict):
        raise AnnotationFormatError(f"{where}: no 'data' object; expected a Label Studio task")
    if isinstance(data.get("text"), str):
        return str(data["text"])
    strings = [v for k, v in data.items() if isinstance(v, str) and k not in _MEDIA]
    if len(strings) != 1:
        raise AnnotationFormatError(
            f"{where}: expected the task's text in data.text (keys found: {', '.join(sorted(data))[:60]}); "
            "is this a project of another type (images, audio, HTML)?"
        )
    return strings[0]


def _annotation(task: dict[str, Any], where: str, audit: Audit, choice: str) -> dict[str, Any] | None:
    annotations = need_list(task.get("annotations", []), where, "annotations")
    if not all(isinstance(a, dict) for a in annotations):
        raise AnnotationFormatError(f"{where}: expected annotation objects with a 'result' list")
    kept = [a for a in annotations if not a.get("was_cancelled")]
    if len(kept) < len(annotations):
        audit.note("cancelled Label Studio annotations skipped", len(annotations) - len(kept))
    if not kept:
        return None
    if len(kept) > 1:
        audit.note(f"Label Studio tasks with several annotations (the {choice} used)")
    if choice == "latest":
        return max(kept, key=lambda a: str(a.get("updated_at") or a.get("created_at") or ""))
    return kept[0] if choice == "first" else kept[-1]


def _json_min(task: dict[str, Any], where: str, audit: Audit) -> TextDocument:
    """A task of the JSON-MIN export: the text at the top, each labels control's regions under its name."""
    text = str(task["text"])
    spans: list[CharSpan] = []
    for value in task.values():
        regions = value if isinstance(value, list) else []
        for region in regions:
            if isinstance(region, dict) and "labels" in region and "start" in region:
                for label in need_list(region["labels"], where, "labels"):
                    span = char_span(
                        text, region.get("start"), region.get("end"), label, where, audit, region.get("text")
                    )
                    if span is not None:
                        spans.append(span)
    return TextDocument(where, text, spans)


def _document(task: dict[str, Any], where: str, audit: Audit, choice: str) -> TextDocument:
    if "data" not in task and isinstance(task.get("text"), str):
        return _json_min(task, where, audit)
    text = _task_text(task, where)
    if "annotations" not in task and "predictions" in task:  # an import file of pre-annotations
        audit.note("Label Studio tasks without annotations read from their first prediction")
        predictions = need_list(task["predictions"], where, "predictions")
        annotation = predictions[0] if predictions and isinstance(predictions[0], dict) else None
    else:
        annotation = _annotation(task, where, audit, choice)
    spans: list[CharSpan] = []
    if annotation is None:
        audit.note("Label Studio tasks without an annotation (read as no entities)")
        return TextDocument(where, text, spans)
    for result in need_list(annotation.get("result"), where, "result"):
        kind = result.get("type") if isinstance(result, dict) else None
        if kind in _BESIDE_SPANS:
            continue
        if kind != "labels" or not isinstance(result.get("value"), dict):
            raise AnnotationFormatError(
                f"{where}: a result of type {kind!r}; expected text spans (type 'labels' with value start, end, "
                "labels): is this an export of another project type?"
            )
        value = result["value"]
        labels = need_list(value.get("labels"), where, "value.labels")
        if not labels:
            raise AnnotationFormatError(f"{where}: a span with an empty 'labels' list; expected its type")
        for label in labels:  # a region with two labels gives two spans; the overlap policy keeps one
            span = char_span(
                text, value.get("start"), value.get("end"), label, where, audit, value.get("text")
            )
            if span is not None:
                spans.append(span)
    return TextDocument(where, text, spans)


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
    return read_labelstudio(path, audit, options.annotation)


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
    options=("annotation",),
)
