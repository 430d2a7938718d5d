"""doccano's JSONL of a sequence-labelling project: its reader, what ``predict --format doccano`` writes (the
import of such a project, https://doccano.github.io/doccano/tutorial/#import-dataset), and its format record.

One document a line: ``{"text": ..., "label": [[start, end, "TYPE"], ...]}`` (``labels`` in some versions;
newer ones write ``"entities": [{"start_offset", "end_offset", "label"}]``). Offsets are Python string
indices (code points), end exclusive.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, json_documents, need_list, need_text
from ner_app.text.outputs import OutputFormat, Target, json_line
from ner_app.text.predictions import TaggedLine, documents


def _doccano(record: dict[str, Any], where: str, audit: Audit) -> tuple[str, list[CharSpan | None]]:
    text = need_text(record.get("text"), where)
    spans: list[CharSpan | None] = []
    if "entities" in record and not ("label" in record or "labels" in record):
        for item in need_list(record["entities"], where, "entities"):
            if not isinstance(item, dict):
                raise AnnotationFormatError(
                    f"{where}: expected an entity {{start_offset, end_offset, label}}"
                )
            spans.append(
                char_span(
                    text, item.get("start_offset"), item.get("end_offset"), item.get("label"), where, audit
                )
            )
        return text, spans
    key = "label" if "label" in record else "labels"
    if key not in record:
        raise AnnotationFormatError(
            f"{where}: no 'label' or 'labels': expected a doccano sequence-labelling line "
            '{"text": ..., "label": [[start, end, "TYPE"], ...]}'
        )
    for item in need_list(record[key], where, key):
        if not (isinstance(item, list) and len(item) == 3):
            raise AnnotationFormatError(
                f'{where}: expected [start, end, "TYPE"] in {key!r}, found {str(item)[:40]!r} '
                "(a text-classification project exports labels without offsets)"
            )
        spans.append(char_span(text, item[0], item[1], item[2], where, audit))
    return text, spans


def read_doccano(path: Path, options: Options, audit: Audit) -> Iterator[TextDocument]:
    return json_documents(path, audit, _doccano)


def write_doccano(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One task a line, a task a document (a block of non-empty lines): its text and its entities as
    ``[start, end, type]``."""
    for record in documents(records):
        yield json_line({"text": record.text, "label": [[e.start, e.end, e.type] for e in record.entities]})


def _detect(probe: Probe) -> bool:
    record = probe.first_record if probe.path.suffix == ".jsonl" else None
    return record is not None and bool({"label", "labels", "entities"} & record.keys())


FORMAT = Format(
    "doccano",
    suffixes=(".jsonl",),
    detect=_detect,
    precedence=60,  # its newer 'entities' key is this program's too: after jsonl, which tells them apart
    clue="'label'",
    read=read_doccano,
    spans=True,
    writer=OutputFormat(
        "doccano",
        "text",
        write_doccano,
        'doccano JSONL, per document (block of non-empty lines) {"text", "label": [[start, end, "TYPE"]]} '
        "(sequence labelling import)",
        documents=True,
        lacks="doccano's import holds a text and its labelled spans, nothing beside them",
    ),
)
