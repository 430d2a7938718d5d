"""brat standoff: its reader, the folder ``predict --format brat`` writes, and its format record.
``NAME.txt`` holds the text, ``NAME.ann`` its annotations (https://brat.nlplab.org/standoff.html).

A text-bound annotation is one line ``T1<TAB>ORG 0 5<TAB>Sony``: id, then type and character offsets (end
exclusive), then the text. A discontinuous one lists its fragments ``0 5;10 15``: the tagger has no such
entity, so it is named in the audit and dropped. Other lines (relations, events, attributes, notes) are
skipped, and so is a text-bound annotation that is not an entity: an event's trigger (a ``T`` whose id, or
whose type, an ``E`` line of the file names as its trigger), or, where the collection has an
``annotation.conf``, one whose type is not in its ``[entities]`` section. Each skip is counted in the audit.

Offsets count characters as brat does: brat opens files with universal newlines, so ``\r\n`` (and a lone
``\r``) is one character, ``\n``; the document's text is read the same way.

``predict --format brat`` writes a folder of ``docNNNNNN.txt`` + ``.ann`` and an ``annotation.conf`` naming
the types. A document is a block of consecutive non-empty input lines (a blank line ends it), as for
``--context document``; its ``.txt`` holds the lines joined by ``\n``.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ner_app.errors import NerAppError
from ner_app.limits import MAX_JSON_INT_DIGITS
from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.read import char_span, inside_collection, read_text
from ner_app.text.outputs import ALTERNATIVES, OutputFormat, Target
from ner_app.text.predictions import TaggedLine, documents


def brat_files(path: str | os.PathLike[str]) -> list[Path]:
    """The ``.ann`` files of one input: the file itself (``NAME.ann`` or ``NAME.txt``), or those of a folder."""
    path = Path(path)
    if path.is_dir():
        for link in (p for p in path.rglob("*") if p.is_symlink() and p.is_dir()):
            inside_collection(link, path)  # not walked into: one out of the folder is named, not left unread
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


NEWLINES = re.compile(r"\r\n?")  # brat's universal newlines: \r\n and a lone \r are one \n
CONFIG = "annotation.conf"
# an offset as written: ASCII digits (``²`` is a digit to str.isdigit, not to int), bounded as JSON offsets are;
# a sign, so that a negative one is named as such
OFFSET = re.compile(rf"-?[0-9]{{1,{MAX_JSON_INT_DIGITS}}}")
TRIGGER = re.compile(r"E\d+\t([^\s:]+):(T\d+)")  # an event line: its type and trigger id come first


def brat_text(path: Path) -> str:
    """A brat file as brat reads it (UTF-8, universal newlines), so that offsets count what brat counts."""
    return NEWLINES.sub("\n", read_text(path))


def read_brat(path: str | os.PathLike[str], audit: Audit) -> Iterator[TextDocument]:
    """The documents of a folder (every ``.ann`` under it) or of one ``.ann``; each file read must lie in the
    folder (the ``.ann``'s folder): a symbolic link out of it is refused."""
    root = Path(path) if Path(path).is_dir() else Path(path).parent
    configs: dict[Path, frozenset[str] | None] = {}
    for ann in brat_files(path):
        if Path(path).is_dir():
            inside_collection(ann, root)
        txt = inside_collection(ann.with_suffix(".txt"), root)
        if not ann.is_file():
            raise AnnotationFormatError(f"{ann}: not found; brat keeps the annotations of {txt} in it")
        if not txt.is_file():
            raise AnnotationFormatError(
                f"{ann}: no {txt.name} beside it; brat keeps the text in a .txt of the same name"
            )
        if ann.parent not in configs:
            configs[ann.parent] = configured_entities(ann.parent, root)
        yield _document(ann, brat_text(txt), audit, configs[ann.parent])


def configured_entities(folder: Path, root: Path) -> frozenset[str] | None:
    """The ``[entities]`` types of the ``annotation.conf`` brat uses for ``folder``: the first found in it or
    a folder above it, up to ``root`` (brat looks up to its data folder); None when there is none."""
    for where in (folder, *folder.parents):
        conf = where / CONFIG
        if conf.is_file():
            return _entities_section(inside_collection(conf, root))
        if where == root or root not in where.parents:
            return None
    return None


def _entities_section(conf: Path) -> frozenset[str]:
    """The types of ``[entities]`` (``[spans]``, its old name): one a line, indented under its parent in a
    hierarchy, ``!`` before a type that only groups others, ``|`` before its display names; ``#`` comments,
    ``----`` separators and ``<MACRO>=...`` lines are not types. A type's stored name has every character
    outside ``[A-Za-z0-9_-]`` as ``_``, as brat stores it."""
    section, found = "", set()
    for line in brat_text(conf).removeprefix("\ufeff").split("\n"):  # a BOM would hide [entities]
        head = re.fullmatch(r"\s*\[(.*)\]\s*", line)
        if head:
            section = {"spans": "entities"}.get(head.group(1), head.group(1))
            continue
        words = line.split()
        if (
            section != "entities"
            or not words
            or words[0].startswith(("#", "<"))
            or set(line.strip()) == {"-"}
        ):
            continue
        term = words[0].split("|")[0].removeprefix("!")
        if term:
            found.add(re.sub(r"[^A-Za-z0-9_-]", "_", term))
    return frozenset(found)


def _document(ann: Path, text: str, audit: Audit, entities: frozenset[str] | None = None) -> TextDocument:
    # a BOM (some Windows editors write one) would hide the first line's T: its annotation would be skipped
    lines = brat_text(ann).removeprefix("\ufeff").split("\n")
    # event triggers: T lines that an E line names (and their types), which are not entities
    triggers = [m.groups() for line in lines if (m := TRIGGER.match(line))]
    trigger_ids = {tid for _, tid in triggers}
    trigger_types = {kind for kind, _ in triggers}
    spans: list[CharSpan] = []
    for number, line in enumerate(lines, start=1):
        if not line.startswith("T"):
            if line.strip():
                audit.note("brat relations, events, attributes and notes skipped")
            continue
        where = f"{ann}:{number}"
        fields = line.split("\t")
        head = fields[1].split(" ", 1) if len(fields) >= 2 else []
        if len(fields) < 2 or len(head) != 2:
            raise AnnotationFormatError(
                f"{where}: expected 'T1<TAB>TYPE START END<TAB>text', found {line[:60]!r}"
            )
        kind, ranges = head
        fragments = [r.split() for r in ranges.split(";")]
        if not all(len(f) == 2 and all(OFFSET.fullmatch(x) for x in f) for f in fragments):
            raise AnnotationFormatError(
                f"{where}: expected integer offsets 'START END' after {kind!r}, found {ranges!r}"
            )
        if fields[0] in trigger_ids or kind in trigger_types:
            audit.note("brat event triggers skipped (not entities)")
            continue
        if entities is not None and kind not in entities:
            audit.note("brat text-bound annotations skipped (type not in annotation.conf [entities])")
            continue
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


def write_brat_files(records: Iterable[TaggedLine], target: Target) -> Iterator[tuple[str, str]]:
    """``docNNNNNN.txt`` and ``.ann`` per document (a block of non-empty lines, joined by ``\\n``), then
    ``annotation.conf``. A ``#`` note line after each entity holds its score, and its other readings when
    asked for (brat shows a note with its annotation; readers skip it). The ``.txt`` is the text as brat reads
    it (universal newlines: input lines that ended in ``\\r\\n`` end in ``\\n``), the offsets counted in it."""
    for n, doc in enumerate(documents(records), start=1):
        written = doc.text + "\n"
        text = NEWLINES.sub("\n", written)
        pairs = [m.start() for m in re.finditer("\r\n", written)]  # each one character fewer after it
        ann: list[str] = []
        for k, e in enumerate(doc.entities, start=1):
            start, end = (at - bisect.bisect_left(pairs, at) for at in (e.start, e.end))
            note = f"score {e.score}" + (
                f"; other readings: {e.alternatives_text()}" if e.alternatives else ""
            )
            # the text field is one line of the .ann: a line break inside the entity is a space there
            surface = text[start:end].replace("\n", " ")
            ann.append(f"T{k}\t{e.type} {start} {end}\t{surface}")
            ann.append(f"#{k}\tAnnotatorNotes T{k}\t{note}")
        yield f"doc{n:06d}.txt", text
        yield f"doc{n:06d}.ann", "".join(f"{line}\n" for line in ann)
    types = "\n".join(target.entity_types)
    yield "annotation.conf", f"[entities]\n{types}\n\n[relations]\n\n[events]\n\n[attributes]\n"


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
        documents=True,
        carries=frozenset({ALTERNATIVES}),
        lacks="a brat note belongs to an annotation, and a token tagged O has none",
    ),
)
