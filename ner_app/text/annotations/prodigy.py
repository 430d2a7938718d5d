"""Prodigy's JSONL (``db-out``, and the ``ner`` interface's input): its reader, what ``predict --format
prodigy`` writes (https://prodi.gy/docs/api-interfaces#ner), and its format record.

``{"text", "tokens", "spans": [{"start", "end", "label"}], "answer"}``: of the answered tasks only those
answered ``accept`` are read; a task without ``answer`` (an input stream, such as ``predict --format
prodigy`` writes) is read as it is. A span without character offsets uses its tokens' (``token_start`` to the
inclusive ``token_end``). Offsets are Python string indices (code points), end exclusive.

``predict --format prodigy`` writes a task a document (a block of non-empty input lines); with
``--alternatives`` each span keeps its other readings (``alternatives``), with ``--flag-missed`` the task its
flagged tokens (``flagged``), both also summed up in the task's ``meta``, which Prodigy shows on the card.
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
from ner_app.text.predictions import Entity, TaggedLine, documents
from ner_app.text.tokenizer import Token, tokenize


def _prodigy(record: dict[str, Any], where: str, audit: Audit) -> tuple[str, list[CharSpan | None]] | None:
    if "answer" in record and record["answer"] != "accept":
        audit.note(f"Prodigy tasks skipped (answer {record['answer']!s:.20})")
        return None
    text = need_text(record.get("text"), where)
    others = sorted({"label", "labels", "entities"} & record.keys())
    if "spans" not in record and others:  # read as no entities, every annotation would be lost
        raise AnnotationFormatError(
            f"{where}: no 'spans' but {others[0]!r}: expected a Prodigy task; this line is doccano's or "
            "this program's JSONL (read it --from doccano or --from jsonl)"
        )
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
    """Prodigy's tokens of a document (the tokenizer predict used, on each of its lines, as predict tagged
    them) and the token at each start and end offset."""
    tokens: list[Token] = []
    at = 0
    for line in record.text.split("\n"):
        tokens.extend(Token(t.text, t.start + at, t.end + at) for t in tokenize(line))
        at += len(line) + 1
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
    span: dict[str, object] = {
        "start": entity.start,
        "end": entity.end,
        "token_start": starts[entity.start],
        "token_end": ends[entity.end],  # inclusive
        "label": entity.type,
    }
    if entity.alternatives is not None:  # a task's own keys are kept with its answer in the dataset
        span["alternatives"] = [a.to_json() for a in entity.alternatives]
    return span


def _meta(record: TaggedLine) -> dict[str, str]:
    """What the annotation card shows under the text (Prodigy's ``meta``): the other readings, the flags."""
    meta = {
        f"alternatives {json.dumps(e.text, ensure_ascii=False)}": e.alternatives_text()
        for e in record.entities
        if e.alternatives
    }
    if record.flagged:
        meta["flagged"] = "; ".join(f.note() for f in record.flagged)
    return meta


def write_prodigy(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One task a line, a task a document (a block of non-empty lines): text, tokens and spans (no
    ``answer``: the annotator gives it); ``flagged`` and ``meta`` when asked for."""
    for record in documents(records):
        tokens, starts, ends = _token_index(record)
        spans = [_prodigy_span(e, starts, ends) for e in record.entities]
        task: dict[str, object] = {"text": record.text, "tokens": tokens, "spans": spans}
        if record.flagged is not None:
            task["flagged"] = [f.to_json() for f in record.flagged]
        if meta := _meta(record):
            task["meta"] = meta
        yield json_line(task)


def _detect(probe: Probe) -> bool:
    record = probe.first_record if probe.path.suffix == ".jsonl" else None
    # an answer alone is no proof: a doccano line may carry an 'answer' field beside its labels
    return record is not None and (
        "spans" in record or ("answer" in record and not {"label", "labels", "entities"} & record.keys())
    )


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
        'Prodigy JSONL, per document (block of non-empty lines) {"text", "tokens", "spans"} (ner.manual input)',
        documents=True,
        carries=frozenset({ALTERNATIVES, FLAGGED}),
    ),
)
