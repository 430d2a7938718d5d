"""brat standoff: its reader, the folder ``predict --format brat`` writes, and its format record.
``NAME.txt`` holds the text, ``NAME.ann`` its annotations (https://brat.nlplab.org/standoff.html).

A text-bound annotation is one line ``T1<TAB>ORG 0 5<TAB>Sony``: id, then type and character offsets (end
exclusive), then the text. A discontinuous one lists its fragments ``0 5;10 15``: the tagger has no such
entity, so it is named in the audit and dropped. Other lines (relations, events, attributes, notes) are
skipped.

``predict --format brat`` writes a folder of ``docNNNNNN.txt`` + ``.ann`` and an ``annotation.conf`` naming
the types. A document is a block of consecutive non-empty input lines (a blank line ends it), as for
``--context document``; its ``.txt`` holds the lines joined by ``\\n``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ner_app.errors import NerAppError
from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, read_text
from ner_app.text.outputs import OutputFormat, Target
from ner_app.text.predictions import TaggedLine

BRAT_NAME = re.compile(r"doc\d{6,}\.(txt|ann)")  # the files of a brat output; also annotation.conf


def brat_files(path: str | os.PathLike[str]) -> list[Path]:
    """The ``.ann`` files of one input: the file itself (``NAME.ann`` or ``NAME.txt``), or those of a folder."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.rglob("*.ann"))
        if not found:
            raise AnnotationFormatError(
                f"{path}: no .ann file in this folder; expected brat's NAME.txt + NAME.ann"
            )
        return found
    if path.suffix == ".txt":
        return [path.with_suffix(".ann")]
    if path.suffix != ".ann":
        raise AnnotationFormatError(f"{path}: expected a brat .ann file, its .txt, or a folder of them")
    return [path]


def read_brat(path: str | os.PathLike[str], audit: Audit) -> Iterator[TextDocument]:
    for ann in brat_files(path):
        txt = ann.with_suffix(".txt")
        if not ann.is_file():
            raise AnnotationFormatError(f"{ann}: not found; brat keeps the annotations of {txt} in it")
        if not txt.is_file():
            raise AnnotationFormatError(
                f"{ann}: no {txt.name} beside it; brat keeps the text in a .txt of the same name"
            )
        yield _document(ann, read_text(txt), audit)


def _document(ann: Path, text: str, audit: Audit) -> TextDocument:
    spans: list[CharSpan] = []
    for number, line in enumerate(read_text(ann).split("\n"), start=1):
        if not line.startswith("T"):
            continue
        where = f"{ann}:{number}"
        fields = line.rstrip("\r").split("\t")
        head = fields[1].split(" ", 1) if len(fields) >= 2 else []
        if len(fields) < 2 or len(head) != 2:
            raise AnnotationFormatError(
                f"{where}: expected 'T1<TAB>TYPE START END<TAB>text', found {line[:60]!r}"
            )
        kind, ranges = head
        fragments = [r.split() for r in ranges.split(";")]
        if not all(len(f) == 2 and all(x.lstrip("-").isdigit() for x in f) for f in fragments):
            raise AnnotationFormatError(
                f"{where}: expected integer offsets 'START END' after {kind!r}, found {ranges!r}"
            )
        if len(fragments) > 1:
            shown = " … ".join(text[int(a) : int(b)] for a, b in fragments)
            audit.report(
                where, "dropped", shown, kind, f"a discontinuous span ({ranges}) that no tag sequence holds"
            )
            continue
        ((start, end),) = fragments
        # the text is the rest of the line: a tab inside the span is a tab of it
        claimed = (
            "\t".join(fields[2:]) if len(fields) > 2 and "\n" not in text[int(start) : int(end)] else None
        )
        span = char_span(text, int(start), int(end), kind, where, audit, claimed)
        if span is not None:
            spans.append(span)
    return TextDocument(str(ann), text, spans)


def _blocks(records: Iterable[TaggedLine]) -> Iterator[list[TaggedLine]]:
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


def write_brat_files(records: Iterable[TaggedLine], target: Target) -> Iterator[tuple[str, str]]:
    """``docNNNNNN.txt`` and ``.ann`` per document (its lines joined by ``\\n``), then ``annotation.conf``.
    A ``#`` note line after each entity holds its score (brat shows it; readers skip it)."""
    for n, block in enumerate(_blocks(records), start=1):
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
    """Whether every file of ``folder`` is one that ``write_brat_files`` writes."""
    return all(p.name == "annotation.conf" or BRAT_NAME.fullmatch(p.name) for p in folder.iterdir())


def _folder_only(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    raise NerAppError("--format brat writes a folder of .txt and .ann files: name it with --output DIR")


def _read(path: Path, options: Options, audit: Audit) -> Iterator[TextDocument]:
    return read_brat(path, audit)


def _detect(probe: Probe) -> bool:
    path = probe.path
    return (
        path.is_dir()
        or path.suffix == ".ann"
        or (path.suffix == ".txt" and path.with_suffix(".ann").is_file())
    )


FORMAT = Format(
    "brat",
    suffixes=("",),  # a folder NAME/ of .ann and .txt files
    detect=_detect,
    precedence=10,  # a folder, an .ann file or a .txt beside one is brat, before any other name or content
    clue="a folder, or NAME.ann",
    read=_read,
    spans=True,
    writer=OutputFormat(
        "brat",
        "text",
        _folder_only,
        "a brat folder (--output DIR): docNNNNNN.txt + .ann per block of non-empty lines, annotation.conf",
        files=write_brat_files,
        is_ours=is_brat_output,
    ),
)
