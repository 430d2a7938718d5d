"""Every annotation format, one ``Format`` record a tool, and what is derived from them: the names ``convert
--from``, ``check-data --format`` and ``data.format`` accept, which formats are span formats, the reader a
name dispatches to, detection in order of precedence, and the suffixes a split file may have.

A new format is one module beside these (its reader, its writer if the tool takes predictions, and its
``FORMAT`` record) and one row in ``FORMATS``. The order of the rows is the order of every list: of the
names in help and messages, and of the suffixes a split is looked up by (``train.txt`` before
``train.jsonl``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ner_app.files import is_special
from ner_app.text.annotations import brat, columns, conllu, doccano, jsonl, labelstudio, prodigy
from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, Document

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        columns.FORMAT,
        conllu.FORMAT,
        doccano.FORMAT,
        labelstudio.FORMAT,
        prodigy.FORMAT,
        brat.FORMAT,
        jsonl.FORMAT,
    )
}


def format_names() -> tuple[str, ...]:
    """Every format's name, in the order of ``FORMATS``."""
    return tuple(FORMATS)


def span_formats() -> tuple[str, ...]:
    """The formats of raw text with character spans (aligned to the tokenizer when read)."""
    return tuple(f.name for f in FORMATS.values() if f.spans)


def format_of(name: str) -> Format:
    """The format called ``name``; one error naming the known ones otherwise."""
    if name not in FORMATS:
        raise AnnotationFormatError(f"unknown format {name!r}: expected one of {', '.join(FORMATS)}")
    return FORMATS[name]


def read_documents(fmt: str, path: Path, options: Options, audit: Audit) -> Iterator[Document]:
    """The documents of one input file (a folder, for brat) in format ``fmt``."""
    if options.outside != "O" and fmt not in span_formats():
        raise AnnotationFormatError(
            f"{path}: outside unknown is for span formats ({', '.join(span_formats())}); a {fmt} file marks "
            "each token that was not annotated with the tag -"
        )
    yield from format_of(fmt).read(path, options, audit)


def by_precedence() -> list[Format]:
    """The formats in the order detection asks them (ascending ``precedence``)."""
    return sorted(FORMATS.values(), key=lambda f: f.precedence)


def detect_format(path: Path, option: str = "--from") -> str:
    """The format of a file, from its name and first record: what ``convert`` and training use when none is
    given. Raises AnnotationFormatError when nothing fits, naming ``option`` as the way to name the format."""
    if path.is_file() and path.stat().st_size == 0:  # no first line to tell a format by: say what it is
        raise AnnotationFormatError(f"{path}: empty: no sentences or records to read")
    probe = Probe(path)
    for fmt in by_precedence():
        if fmt.detect(probe):
            return fmt.name
    sharing = [f for f in by_precedence() if path.suffix and path.suffix in f.suffixes]
    if len(sharing) == 1 and path.is_file():  # the name alone says it: its reader names what is wrong inside
        return sharing[0].name
    if len(sharing) > 1 and not is_special(path):  # several formats of this name: the first record decides
        clues = [f.clue for f in sharing]
        raise AnnotationFormatError(
            f"{path}:1: cannot tell which {path.suffix[1:].upper()} format this is (expected "
            f"{', '.join(clues[:-1])} or {clues[-1]}); name it with {option}"
        )
    raise AnnotationFormatError(
        f"{path}: cannot tell its format from its name or first line; name it with {option} ({', '.join(FORMATS)})"
    )


def split_suffixes(fmt: str | None) -> tuple[str, ...]:
    """How the file of a split in format ``fmt`` may end (``""``: a folder), or in any format (``None``): the
    suffixes of every format, in the order of ``FORMATS``, each once."""
    if fmt:
        return format_of(fmt).suffixes
    return tuple(dict.fromkeys(s for f in FORMATS.values() for s in f.suffixes))
