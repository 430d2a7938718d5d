"""Bounded reading of annotation files: whole files, JSON lines, and the checks every span reader shares."""

from __future__ import annotations

import functools
import json
import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ner_app import limits
from ner_app.files import is_special
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument

EXPORT_HINT = "re-export it from the tool, or split it into several files"
# A JSON string escape of a UTF-16 surrogate that is not half of a pair (``\ud800`` alone): Python reads it as a
# string no UTF-8 file or Arrow column can hold. An even run of backslashes before it is escaped backslashes.
_LONE_SURROGATE = re.compile(
    r"(?<!\\)(?:\\\\)*\\u(?:(?P<high>[dD][89abAB][0-9a-fA-F]{2})(?P<low>\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|(?P<lone>[dD][c-fC-F][0-9a-fA-F]{2}))"
)


class _TooManyDigits(Exception):
    """A JSON integer longer than ``limits.MAX_JSON_INT_DIGITS`` (raised inside ``json.loads``)."""

    def __init__(self, digits: str) -> None:
        super().__init__(digits)
        self.digits = digits


def _bounded_int(digits: str) -> int:
    """``json.loads``' integers: an offset or id of thousands of digits is refused before ``int`` works on it."""
    if len(digits.lstrip("-")) > limits.MAX_JSON_INT_DIGITS:
        raise _TooManyDigits(digits)
    return int(digits)


def load_json(text: str, name: str, first_line: int = 1) -> Any:
    """``json.loads`` of ``text`` (line ``first_line`` of the file ``name`` onward) with what Python accepts and
    no export holds refused in one line naming the line: a lone surrogate escape, an integer of more than
    ``limits.MAX_JSON_INT_DIGITS`` digits. ``json.JSONDecodeError`` and ``RecursionError`` are the caller's."""
    lone = next((m for m in _LONE_SURROGATE.finditer(text) if m["lone"] or not m["low"]), None)
    if lone is not None:
        line = first_line + text.count("\n", 0, lone.start())
        raise AnnotationFormatError(
            f"{name}:{line}: a lone surrogate escape \\u{lone['lone'] or lone['high']} in a JSON string; "
            "expected text whose escapes are whole characters (UTF-16 surrogates come in pairs)"
        )
    try:
        return json.loads(text, parse_int=_bounded_int)
    except _TooManyDigits as err:
        line = first_line + text.count("\n", 0, max(text.find(err.digits), 0))
        raise AnnotationFormatError(
            f"{name}:{line}: a JSON integer of {len(err.digits.lstrip('-')):,} digits; expected offsets and ids "
            f"of at most {limits.MAX_JSON_INT_DIGITS} digits"
        ) from None


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (a terminal escape sequence starts with one)."""
    return any(unicodedata.category(c) == "Cc" for c in text)


def inside_collection(path: Path, root: Path) -> Path:
    """``path``, a file of the collection ``root``, when it resolves inside ``root``; a symbolic link (or a
    ``..``) out of it is refused in one line naming it: a link to a system file would copy its text into the
    training data."""
    real, home = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([real, home]) != home:
        raise AnnotationFormatError(
            f"{path}: resolves outside {root} (a symbolic link or '..'); expected the collection's own files "
            "(copy the file into it)"
        )
    return path


def refuse_special(path: str | os.PathLike[str]) -> None:
    """A FIFO would block the open and a device never end: one line instead, before anything is opened."""
    if is_special(path):
        raise AnnotationFormatError(
            f"{path}: not a regular file (a FIFO, device or socket); expected an export"
        )


def read_text(path: str | os.PathLike[str]) -> str:
    """A whole UTF-8 file within ``MAX_ANNOTATION_FILE_BYTES``; the error of a byte that is not UTF-8 names the
    line (a file with lines in two encodings stops there). No newline translation: offsets count ``\\r`` too."""
    if is_special(path):  # a FIFO would block the open, a device would never end
        raise AnnotationFormatError(
            f"{path}: not a regular file (a FIFO, device or socket); expected an export"
        )
    with open(path, "rb") as f:
        data = f.read(limits.MAX_ANNOTATION_FILE_BYTES + 1)
    if len(data) > limits.MAX_ANNOTATION_FILE_BYTES:
        raise AnnotationFormatError(
            f"{path}: larger than {limits.MAX_ANNOTATION_FILE_BYTES:,} bytes, the most such a file may be; "
            f"not read ({EXPORT_HINT})"
        )
    return decode(data, os.fspath(path), 1)


def decode(data: bytes, path: str, first_line: int) -> str:
    """UTF-8 text of ``data`` whose first line is line ``first_line`` of ``path``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = first_line + data.count(b"\n", 0, err.start)
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise AnnotationFormatError(
            f"{path}:{line}: expected UTF-8 text, found byte 0x{data[err.start]:02x} at column {column} "
            "(a file in another encoding, or lines in two encodings: convert it, e.g. iconv -f latin1 -t utf-8)"
        ) from None


def json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line of a JSONL file; each line is read within
    ``MAX_ANNOTATION_LINE_BYTES`` and must be one JSON object. A file without one is an empty export."""
    name = os.fspath(path)
    found = False
    refuse_special(path)
    with open(path, "rb") as f:
        number = 0
        while raw := f.readline(limits.MAX_ANNOTATION_LINE_BYTES + 1):
            number += 1
            if len(raw) > limits.MAX_ANNOTATION_LINE_BYTES:
                raise AnnotationFormatError(
                    f"{name}:{number}: a line longer than {limits.MAX_ANNOTATION_LINE_BYTES:,} bytes; expected one "
                    f"JSON object (one document) a line, within that bound ({EXPORT_HINT})"
                )
            line = decode(raw, name, number)
            if number == 1:
                line = line.removeprefix("\ufeff")  # a BOM, as some Windows tools write
            if not line.strip():
                continue
            try:
                value = load_json(line, name, number)
            except json.JSONDecodeError as err:
                raise AnnotationFormatError(
                    f"{name}:{number}: not valid JSON ({err.msg} at column {err.colno}); expected one JSON object a line"
                ) from None
            except RecursionError:
                raise AnnotationFormatError(f"{name}:{number}: JSON nested too deeply") from None
            if not isinstance(value, dict):
                raise AnnotationFormatError(
                    f"{name}:{number}: expected a JSON object, found {type(value).__name__} {line.strip()[:40]!r}"
                )
            found = True
            yield number, value
    if not found:
        raise AnnotationFormatError(f"{name}: empty export: no JSON line in it (expected one object a line)")


# The spans of one JSON-lines record: ``(text, spans)``, a span None where it was dropped (and audited), or
# None for a record not to be read (Prodigy: a task not accepted).
SpansOf = Callable[[dict[str, Any], str, Audit], tuple[str, list[CharSpan | None]] | None]


def json_documents(path: str | os.PathLike[str], audit: Audit, spans_of: SpansOf) -> Iterator[TextDocument]:
    """The documents of a JSON-lines span format, one a line, each read by ``spans_of``."""
    for number, record in json_lines(path):
        where = f"{os.fspath(path)}:{number}"
        found = spans_of(record, where, audit)
        if found is None:  # a task not to be read (Prodigy: not accepted)
            continue
        text, spans = found
        yield TextDocument(where, text, [s for s in spans if s is not None])


def need_text(value: Any, where: str, key: str = "text") -> str:
    if not isinstance(value, str):
        raise AnnotationFormatError(f"{where}: expected a string {key!r}, found {shown(value)}")
    return value


def need_list(value: Any, where: str, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise AnnotationFormatError(f"{where}: expected a list {key!r}, found {shown(value)}")
    return value


def need_flag(value: Any, where: str, key: str) -> bool:
    """A true/false field; absent (None) is false."""
    if value is not None and not isinstance(value, bool):
        raise AnnotationFormatError(f"{where}: expected {key!r} true or false, found {shown(value)}")
    return bool(value)


def char_span(
    text: str, start: Any, end: Any, label: Any, where: str, audit: Audit, claimed: Any = None
) -> CharSpan | None:
    """A checked span of ``text``: integer offsets with 0 <= start < end <= len(text) and a non-empty label,
    or one error naming ``where``. When the file also gives the span's text (``claimed``) and it is not
    ``text[start:end]``, the offsets point elsewhere: the span is dropped and named in the audit."""
    if isinstance(claimed, str) and _is_int(start) and _is_int(end) and text[start:end] != claimed:
        units = _utf16_units(text)  # a JavaScript front end counts UTF-16 code units, not code points
        if start in units and end in units and text[units[start] : units[end]] == claimed:
            audit.note("spans whose offsets count UTF-16 code units (read as such)")
            start, end = units[start], units[end]
    for name, offset in (("start", start), ("end", end)):
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise AnnotationFormatError(f"{where}: expected an integer {name} offset, found {shown(offset)}")
        if offset < 0:
            raise AnnotationFormatError(f"{where}: {name} offset {offset} is negative; expected 0 or more")
        if offset > len(text):
            raise AnnotationFormatError(
                f"{where}: {name} offset {offset} is beyond the text ({len(text)} characters)"
            )
    if start >= end:
        raise AnnotationFormatError(f"{where}: start {start} >= end {end}; expected start < end")
    if not isinstance(label, str) or not label.strip():
        raise AnnotationFormatError(f"{where}: expected a label (a non-empty string), found {shown(label)}")
    if has_control(label):  # a terminal escape in a type name would reach every message and report
        raise AnnotationFormatError(
            f"{where}: label {label[:40]!r} holds a control character; expected a type name of printable characters"
        )
    if claimed is not None and claimed != text[start:end]:
        audit.report(
            where,
            "dropped",
            text[start:end],
            label,
            f"the file gives its text as {str(claimed)[:60]!r}: the offsets do not point at it",
        )
        return None
    return CharSpan(start, end, label, where)


def shown(value: Any) -> str:
    """A JSON value for a message: its type and its first 40 characters."""
    return (
        f"{type(value).__name__} {json.dumps(value, ensure_ascii=False)[:40]}"
        if value is not None
        else "nothing"
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@functools.lru_cache(maxsize=2)
def _utf16_units(text: str) -> dict[int, int]:
    """UTF-16 code unit offset -> code point offset of every character boundary of ``text``; empty when the
    two agree (no character outside the Basic Multilingual Plane)."""
    if all(ord(c) <= 0xFFFF for c in text):
        return {}
    units, at = {}, 0
    for index, char in enumerate(text):
        units[at] = index
        at += 2 if ord(char) > 0xFFFF else 1
    units[at] = len(text)
    return units
