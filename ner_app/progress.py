"""Progress that suits where stderr goes: tqdm bars on a terminal, a few plain lines in a log file.

A tqdm bar redraws itself with carriage returns; written to a file or a pipe that becomes one huge line per bar
(Lightning's bar alone writes one redraw per batch). When stderr is not a terminal, the loops of this project
report instead with whole lines on stderr: an iteration or a download at most once per 10% of its total
(``LineProgress``); Lightning's training loops once per 10% of an epoch and at its end, or once per 10% of
``max_steps``
(``ner_app.runtime.log_progress``, kept apart so that commands without Lightning do not import it: 5 s).
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, TextIO, TypeVar

from tqdm import tqdm

_T = TypeVar("_T")
STEPS = 10  # line reports per total: one per 10%


def console_logging() -> None:
    """Log lines (INFO and up) on stderr as plain messages, for the long commands (train, pretrain-bilm);
    matplotlib's own notes ("generated new fontManager" on a fresh cache folder) are not the user's news."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)


def stderr_is_terminal() -> bool:
    """Whether a redrawn bar on stderr reaches a person (and not a log file or a pipe)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


class Progress(Protocol):
    """What the loops use of a bar: tqdm's ``update`` and ``close``."""

    def update(self, n: float = 1) -> Any: ...

    def close(self) -> None: ...


def _amount(value: float, unit: str) -> str:
    if unit == "B":  # bytes read best in binary multiples
        for prefix in ("", "Ki", "Mi", "Gi"):
            if abs(value) < 1024 or prefix == "Gi":
                return f"{value:.0f} B" if not prefix else f"{value:.1f} {prefix}B"
            value /= 1024
    return f"{value:g} {unit}"


class LineProgress:
    """A bar for logs: one line each time another 10% of ``total`` is done, and one at the end.

    Without a total (unknown length) it writes only the closing line. Lines go to ``stream`` (stderr when None,
    looked up at write time so that a test's or a caller's redirection is honoured).
    """

    def __init__(
        self, total: float | None, desc: str, unit: str = "it", stream: TextIO | None = None
    ) -> None:
        self.total, self.desc, self.unit, self.stream = total, desc, unit, stream
        self.n: float = 0
        self._reported = 0  # tenths already written
        self._start = time.perf_counter()
        self._closed = False

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"{self.desc}: {text} ({time.perf_counter() - self._start:.1f} s)\n")
        stream.flush()

    def update(self, n: float = 1) -> None:
        self.n += n
        if not self.total or self.total <= 0:
            return
        tenths = min(STEPS, math.floor(STEPS * self.n / self.total))
        if tenths > self._reported:
            self._reported = tenths
            done, total = _amount(self.n, self.unit), _amount(self.total, self.unit)
            self._write(f"{10 * tenths}% ({done} of {total})")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reported < STEPS:  # the end was not reported yet: a short, unfinished or unsized run
            self._write(f"{_amount(self.n, self.unit)} done")

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: float | None, desc: str, unit: str = "it", enabled: bool = True) -> Progress:
    """A tqdm bar on a terminal, a ``LineProgress`` otherwise; a silent tqdm when not ``enabled``."""
    if not enabled:
        return tqdm(total=total, disable=True)
    if stderr_is_terminal():
        return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", unit_divisor=1024)
    return LineProgress(total, desc, unit)


def track(
    items: Iterable[_T], desc: str, total: int | None = None, unit: str = "it", enabled: bool = True
) -> Iterator[_T]:
    """Iterate ``items`` with a bar (see ``progress_bar``); the total defaults to ``len(items)``."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    bar = progress_bar(total, desc, unit, enabled)
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()
