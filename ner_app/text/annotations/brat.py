"""brat standoff: ``NAME.txt`` holds the text, ``NAME.ann`` its annotations.

A text-bound annotation is one line ``T1<TAB>ORG 0 5<TAB>Sony``: id, then type and character offsets (end
exclusive), then the text. A discontinuous one lists its fragments ``0 5;10 15``: the tagger has no such
entity, so it is named in the audit and dropped. Other lines (relations, events, attributes, notes) are
skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, read_text


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
