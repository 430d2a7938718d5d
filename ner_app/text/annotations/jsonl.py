"""JSONL span formats, one document a line: doccano, Prodigy, and this program's own (what ``predict`` writes).

- doccano (sequence labelling export): ``{"text": ..., "label": [[start, end, "TYPE"], ...]}`` (``labels``
  in some versions; newer ones write ``"entities": [{"start_offset", "end_offset", "label"}]``).
- Prodigy (``db-out``): ``{"text", "tokens", "spans": [{"start", "end", "label"}], "answer"}``; of the
  answered tasks only those answered ``accept`` are read; a task without ``answer`` (an input stream, such as
  ``predict --format prodigy`` writes) is read as it is. A span without character offsets uses its tokens' (``token_start`` to the
  inclusive ``token_end``).
- this program: ``{"text", "entities": [{"start", "end", "type"}]}`` (``text`` and ``score`` of an entity,
  when present, are what ``predict`` adds; the text must match the offsets).

Offsets are Python string indices (Unicode code points), end exclusive, as all three tools write them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, json_lines, need_list, need_text


def _documents(path: str | os.PathLike[str], audit: Audit, spans_of: Any) -> Iterator[TextDocument]:
    for number, record in json_lines(path):
        where = f"{os.fspath(path)}:{number}"
        found = spans_of(record, where, audit)
        if found is None:  # a task not to be read (Prodigy: not accepted)
            continue
        text, spans = found
        yield TextDocument(where, text, [s for s in spans if s is not None])


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


def read_doccano(path: str | os.PathLike[str], audit: Audit) -> Iterator[TextDocument]:
    return _documents(path, audit, _doccano)


def read_prodigy(path: str | os.PathLike[str], audit: Audit) -> Iterator[TextDocument]:
    return _documents(path, audit, _prodigy)


def read_jsonl(path: str | os.PathLike[str], audit: Audit) -> Iterator[TextDocument]:
    return _documents(path, audit, _own)
