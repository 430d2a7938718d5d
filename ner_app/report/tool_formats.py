"""Predictions as pre-annotations of annotation tools: each file is what its tool imports, and what ``convert
--from`` the same format reads back into exactly the predicted entities (docs/own_data.md).

- doccano: JSONL, one line of text a task ``{"text", "label": [[start, end, "TYPE"], ...]}``
  (https://doccano.github.io/doccano/tutorial/#import-dataset, sequence labelling);
- Label Studio: one JSON list of tasks ``{"data": {"text"}, "predictions": [{"model_version", "score",
  "result": [{"id", "from_name", "to_name", "type": "labels", "value": {"start", "end", "text",
  "labels"}, "score"}]}]}`` for the named-entity template (``<Labels name="label" toName="text">``;
  https://labelstud.io/guide/predictions);
- Prodigy: JSONL ``{"text", "tokens": [{"text", "start", "end", "id", "ws"}], "spans": [{"start", "end",
  "token_start", "token_end", "label"}]}``, ``token_end`` inclusive (https://prodi.gy/docs/api-interfaces#ner);
- brat: a folder of ``NAME.txt`` + ``NAME.ann`` (``T1<TAB>TYPE START END<TAB>text``) and an
  ``annotation.conf`` naming the types (https://brat.nlplab.org/standoff.html). A document is a block of
  consecutive non-empty input lines (a blank line ends it), as for ``--context document``; its ``.txt`` holds
  the lines joined by ``\\n``.

Offsets are Python string indices (code points), end exclusive, as each tool documents them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ner_app.errors import NerAppError
from ner_app.report.format_types import OutputFormat, Target, json_line
from ner_app.text.predictions import Entity, TaggedLine
from ner_app.text.tokenizer import tokenize

FROM_NAME, TO_NAME = "label", "text"  # the control and object names of Label Studio's named-entity template
BRAT_NAME = re.compile(r"doc\d{6,}\.(txt|ann)")  # the files of a brat output; also annotation.conf


def write_doccano(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One task a line: the line's text and its entities as ``[start, end, type]``."""
    for record in records:
        yield json_line({"text": record.text, "label": [[e.start, e.end, e.type] for e in record.entities]})


def _labelstudio_task(record: TaggedLine, target: Target) -> dict[str, object]:
    result = [
        {
            "id": f"e{n}",
            "from_name": FROM_NAME,
            "to_name": TO_NAME,
            "type": "labels",
            "value": {"start": e.start, "end": e.end, "text": e.text, "labels": [e.type]},
            "score": e.score,
        }
        for n, e in enumerate(record.entities, start=1)
    ]
    prediction: dict[str, object] = {"model_version": target.model_version, "result": result}
    if record.entities:  # the least certain entity: sorting by it puts the tasks to review first
        prediction["score"] = min(e.score for e in record.entities)
    return {"data": {"text": record.text}, "predictions": [prediction]}


def write_labelstudio(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One JSON list, a task a line of input, streamed: ``[``, the tasks separated by commas, ``]``."""
    yield "["
    for n, record in enumerate(records):
        yield ("," if n else "") + "\n" + json.dumps(_labelstudio_task(record, target), ensure_ascii=False)
    yield "\n]\n"


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


def _documents(records: Iterable[TaggedLine]) -> Iterator[list[TaggedLine]]:
    """Blocks of consecutive non-empty lines; blank lines end a block and belong to none."""
    block: list[TaggedLine] = []
    for record in records:
        if record.text.strip():
            block.append(record)
        elif block:
            yield block
            block = []
    if block:
        yield block


def brat_files(records: Iterable[TaggedLine], target: Target) -> Iterator[tuple[str, str]]:
    """``docNNNNNN.txt`` and ``.ann`` per document (its lines joined by ``\\n``), then ``annotation.conf``.
    A ``#`` note line after each entity holds its score (brat shows it; readers skip it)."""
    for n, block in enumerate(_documents(records), start=1):
        ann: list[str] = []
        at = 0
        for record in block:
            for e in record.entities:
                k = len(ann) // 2 + 1  # two lines an entity
                ann.append(f"T{k}\t{e.type} {at + e.start} {at + e.end}\t{e.text}")
                ann.append(f"#{k}\tAnnotatorNotes T{k}\tscore {e.score}")
            at += len(record.text) + 1
        yield f"doc{n:06d}.txt", "\n".join(r.text for r in block) + "\n"
        yield f"doc{n:06d}.ann", "".join(f"{line}\n" for line in ann)
    types = "\n".join(target.entity_types)
    yield "annotation.conf", f"[entities]\n{types}\n\n[relations]\n\n[events]\n\n[attributes]\n"


def is_brat_output(folder: Path) -> bool:
    """Whether every file of ``folder`` is one that ``brat_files`` writes."""
    return all(p.name == "annotation.conf" or BRAT_NAME.fullmatch(p.name) for p in folder.iterdir())


def _folder_only(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    raise NerAppError("--format brat writes a folder of .txt and .ann files: name it with --output DIR")


TOOL_FORMATS = (
    OutputFormat(
        "doccano",
        "text",
        write_doccano,
        'doccano JSONL, per input line {"text", "label": [[start, end, "TYPE"]]} (sequence labelling import)',
    ),
    OutputFormat(
        "labelstudio",
        "text",
        write_labelstudio,
        "Label Studio tasks with predictions (a JSON list; from_name label, to_name text), to review",
    ),
    OutputFormat(
        "prodigy",
        "text",
        write_prodigy,
        'Prodigy JSONL, per input line {"text", "tokens", "spans"} (ner.manual input)',
    ),
    OutputFormat(
        "brat",
        "text",
        _folder_only,
        "a brat folder (--output DIR): docNNNNNN.txt + .ann per block of non-empty lines, annotation.conf",
        files=brat_files,
        is_ours=is_brat_output,
    ),
)
