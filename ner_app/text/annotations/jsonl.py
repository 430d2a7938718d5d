"""This program's JSONL: what ``predict`` writes (``TaggedLine.to_json``), read back so predictions can be
corrected and trained on; its reader, its writer and its format record.

``{"text", "entities": [{"start", "end", "type"}]}``, one document a line (``text`` and ``score`` of an
entity, when present, are what ``predict`` adds; the text must match the offsets). Offsets are Python string
indices (code points), end exclusive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, json_documents, need_list, need_text
from ner_app.text.outputs import ALTERNATIVES, FLAGGED, OutputFormat, Target, json_line
from ner_app.text.predictions import TaggedLine


def _own(record: dict[str, Any], where: str, audit: Audit) -> tuple[str, list[CharSpan | None]]:
    text = need_text(record.get("text"), where)
    if "entities" not in record:
        raise AnnotationFormatError(f'{where}: no \'entities\': expected {{"text": ..., "entities": [...]}}')
    spans: list[CharSpan | None] = []
    for item in need_list(record["entities"], where, "entities"):
        if not isinstance(item, dict):
            raise AnnotationFormatError(
                f"{where}: expected an entity {{start, end, type}}, found {str(item)[:40]!r}"
            )
        spans.append(
            char_span(
                text, item.get("start"), item.get("end"), item.get("type"), where, audit, item.get("text")
            )
        )
    return text, spans


def read_jsonl(path: Path, options: Options, audit: Audit) -> Iterator[TextDocument]:
    return json_documents(path, audit, _own)


def write_jsonl(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One JSON object per line (``TaggedLine.to_json``); non-ASCII kept, line separators escaped."""
    for record in records:
        yield json_line(record.to_json())


def _detect(probe: Probe) -> bool:
    record = probe.first_record if probe.path.suffix == ".jsonl" else None
    # doccano's newer export has 'entities' too, with start_offset and end_offset
    return (
        record is not None
        and "entities" in record
        and "start_offset" not in json.dumps(record["entities"])[:2000]
    )


FORMAT = Format(
    "jsonl",
    suffixes=(".jsonl",),
    detect=_detect,
    precedence=40,
    clue="'entities'",
    read=read_jsonl,
    spans=True,
    writer=OutputFormat(
        "jsonl",
        "text",
        write_jsonl,
        'JSON lines: per input line {"text", "entities": [{"start", "end", "type", "text", "score"}]}',
        carries=frozenset({ALTERNATIVES, FLAGGED}),
    ),
)
