"""Prodigy's JSONL (``db-out``, and the ``ner`` interface's input): its reader, what ``predict --format
prodigy`` writes (https://prodi.gy/docs/api-interfaces#ner), and its format record.

``{"text", "tokens", "spans": [{"start", "end", "label"}], "answer"}``: of the answered tasks only those
answered ``accept`` are read; a task without ``answer`` (an input stream, such as ``predict --format
prodigy`` writes) is read as it is. A span without character offsets uses its tokens' (``token_start`` to the
inclusive ``token_end``). Offsets are Python string indices (code points), end exclusive.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, json_documents, need_list, need_text
from ner_app.text.outputs import OutputFormat, Target, json_line
from ner_app.text.predictions import Entity, TaggedLine
from ner_app.text.tokenizer import tokenize


def _prodigy(record: dict[str, Any], where: str, audit: Audit) -> tuple[str, list[CharSpan | None]] | None:
    if "answer" in record and record["answer"] != "accept":
        audit.note(f"Prodigy tasks skipped (answer {record['answer']!s:.20})")
        return None
    text = need_text(record.get("text"), where)
    tokens = record.get("tokens")
    spans: list[CharSpan | None] = []
    for item in need_list(record.get("spans", []), where, "spans"):
        if not isinstance(item, dict):
            raise AnnotationFormatError(
                f"{where}: expected a span {{start, end, label}}, found {str(item)[:40]!r}"
            )
        start, end = item.get("start"), item.get("end")
        if start is None and end is None and isinstance(tokens, list):
            start, end = _token_offsets(tokens, item.get("token_start"), item.get("token_end"), where)
        spans.append(char_span(text, start, end, item.get("label"), where, audit, item.get("text")))
    return text, spans


def _token_offsets(tokens: list[Any], first: Any, last: Any, where: str) -> tuple[Any, Any]:
    """Character offsets of Prodigy tokens ``first`` to ``last`` (inclusive)."""
    ok = all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(tokens) for i in (first, last))
    if not ok or not all(isinstance(tokens[i], dict) for i in (first, last)):
        raise AnnotationFormatError(
            f"{where}: a span without start/end needs token_start and token_end indexing 'tokens' "
            f"({len(tokens)} tokens), found {first!r} and {last!r}"
        )
    return tokens[first].get("start"), tokens[last].get("end")


def read_prodigy(path: Path, options: Options, audit: Audit) -> Iterator[TextDocument]:
    return json_documents(path, audit, _prodigy)


def _token_index(record: TaggedLine) -> tuple[list[dict[str, object]], dict[int, int], dict[int, int]]:
    """Prodigy's tokens of a line (the tokenizer predict used) and the token at each start and end offset."""
    tokens = tokenize(record.text)
    found = [
        {
            "text": t.text,
            "start": t.start,
            "end": t.end,
            "id": i,
            "ws": record.text[t.end : t.end + 1].isspace(),
        }
        for i, t in enumerate(tokens)
    ]
    return found, {t.start: i for i, t in enumerate(tokens)}, {t.end: i for i, t in enumerate(tokens)}


def _prodigy_span(entity: Entity, starts: dict[int, int], ends: dict[int, int]) -> dict[str, object]:
    if entity.start not in starts or entity.end not in ends:  # predict's entities are whole tokens
        raise ValueError(f"entity {entity.text!r} at {entity.start}-{entity.end} does not cover whole tokens")
    return {
        "start": entity.start,
        "end": entity.end,
        "token_start": starts[entity.start],
        "token_end": ends[entity.end],  # inclusive
        "label": entity.type,
    }


def write_prodigy(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One task a line: text, tokens and spans (no ``answer``: the annotator gives it)."""
    for record in records:
        tokens, starts, ends = _token_index(record)
        spans = [_prodigy_span(e, starts, ends) for e in record.entities]
        yield json_line({"text": record.text, "tokens": tokens, "spans": spans})


def _detect(probe: Probe) -> bool:
    record = probe.first_record if probe.path.suffix == ".jsonl" else None
    return record is not None and ("spans" in record or "answer" in record)


FORMAT = Format(
    "prodigy",
    suffixes=(".jsonl",),
    detect=_detect,
    precedence=50,
    clue="'spans'",
    read=read_prodigy,
    spans=True,
    writer=OutputFormat(
        "prodigy",
        "text",
        write_prodigy,
        'Prodigy JSONL, per input line {"text", "tokens", "spans"} (ner.manual input)',
    ),
)
