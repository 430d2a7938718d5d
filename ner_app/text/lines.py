"""The one line reader: input lines split on ``\\n`` only and decoded strictly, so that input lines and output
lines stay one to one (``predict``, ``embed``; docs/reliability.md), and text files read the same way
(pretraining's held-out and extra text).

A lone ``\\r`` inside a line is part of that line (``str.splitlines`` would split there and shift every later
output); one ``\\r`` before the ``\\n`` is a Windows line end and dropped. A UTF-8 BOM at the very start is
dropped. Bytes that are not UTF-8 are an error naming the line and the byte: nothing is replaced or echoed raw.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ner_app.errors import MissingFileError, NerAppError


class InputTextError(NerAppError):
    """Input text that is not UTF-8."""


def decoded_lines(raw_lines: Iterable[bytes], name: str) -> Iterator[str]:
    """Each ``\\n``-terminated byte line of ``raw_lines`` (a binary file) as text without its line end."""
    for number, raw in enumerate(raw_lines, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        line = line[:-1] if line.endswith(b"\r") else line
        if number == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputTextError(
                f"{name}:{number}: byte {err.start + 1} (0x{line[err.start]:02x}) is not UTF-8; "
                "convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
            ) from None


def read_lines(path: str | Path, what: str) -> list[str]:
    """Every line of a UTF-8 text file (``decoded_lines``: split on ``\\n`` only, a BOM dropped); a file that
    cannot be read is one MissingFileError naming the path and ``what``, bytes that are not UTF-8 one
    InputTextError naming the line."""
    try:
        with open(path, "rb") as f:
            return list(decoded_lines(f, str(path)))
    except OSError as err:
        raise MissingFileError(f"{path}: cannot read {what}: {err.strerror or err}") from None
