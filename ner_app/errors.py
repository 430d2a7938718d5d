"""One base class for a user's mistakes, and the one policy every command applies to them.

A ``NerAppError`` (bad config, bad file, refused checkpoint, ...) is reported as one line on stderr with exit
code 2. Anything else is a bug and keeps its traceback. SIGTERM stops a command with one line and exit code 143.
"""

from __future__ import annotations

import errno
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


class NerAppError(ValueError):
    """Bad input from the user: the message names the file, line or key and what was expected."""


# errno values of a write that failed for want of space (EFBIG: a file-size limit).
DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# errno values of a path the user gave that cannot be used as one (the OS names the path in the message).
BAD_PATH = {errno.ELOOP, errno.ENAMETOOLONG, errno.EEXIST, errno.ENOTDIR}

# Exit code of every command for bad input (argparse uses the same code for bad arguments).
USER_ERROR_EXIT = 2

# Exit code of a command stopped by SIGTERM: what a shell reports for a process the signal ended (128 + 15).
SIGTERM_EXIT = 128 + signal.SIGTERM
SIGINT_EXIT = 128 + signal.SIGINT
# Atomic writes: on an exception the temporary file goes and the target is untouched.
REMOVED = "files it was writing were removed"


class Stopped(SystemExit):
    """SIGTERM arrived. Raised in the main thread, so ``finally`` blocks run: atomic writes remove their
    temporary files, and the run folder's lock is released."""

    def __init__(self) -> None:
        super().__init__(SIGTERM_EXIT)


# The stops that arrived while ``stopping_on_signals`` held, oldest first. Kept because Python prints and drops an
# exception raised where it cannot propagate (a ``__del__``, a weakref callback, the garbage collector): the
# long loops call ``raise_if_stopped`` between batches, so a dropped stop still ends the command.
_stops: list[int] = []


def _stop_exception(signum: int) -> BaseException:
    return Stopped() if signum == signal.SIGTERM else KeyboardInterrupt()


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    _stops.append(signum)
    raise _stop_exception(signum)


def raise_if_stopped() -> None:
    """Raise the stop (``Stopped`` or ``KeyboardInterrupt``) of a signal whose first raise Python dropped."""
    if _stops:
        raise _stop_exception(_stops[0])


def stop_reported() -> None:
    """The caller caught the stop, told the user and ends the command with its code: nothing to raise again."""
    _stops.clear()


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """SIGTERM raises ``Stopped`` inside the block (the default action would end the process on the spot), and
    Ctrl-C ``KeyboardInterrupt`` as usual; both are recorded for ``raise_if_stopped``. A SIGINT the process
    ignores (a background job, a worker) stays ignored.

    Lightning adds its own SIGTERM handler in front of this one while it trains, and keeps calling this one.
    """
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    pending = list(_stops)  # an enclosing block's stop: heeded inside too, and its own again afterwards
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_stopped)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_stopped)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _stops[:] = pending


def run_reporting_errors(command: Callable[[], int]) -> int:
    """Run ``command``; turn a user's mistake into one ``error: ...`` line and exit code 2, and SIGTERM into
    one line and exit code 143 (Ctrl-C: 130)."""
    try:
        with stopping_on_signals():
            code = command()
            if _stops:  # dropped after the last loop's check: the work is done, and the shell must still know
                signum = _stops[0]
                name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
                print(f"{name} arrived as the command finished; what it wrote is complete", file=sys.stderr)
                return SIGTERM_EXIT if signum == signal.SIGTERM else SIGINT_EXIT
            return code
    except Stopped:
        print(f"stopped by SIGTERM before the command finished; {REMOVED}", file=sys.stderr)
        return SIGTERM_EXIT
    except KeyboardInterrupt:  # Ctrl-C: one line instead of a traceback (a training prints Lightning's own)
        print(f"interrupted by Ctrl-C before the command finished; {REMOVED}", file=sys.stderr)
        return SIGINT_EXIT
    except NerAppError as err:
        print(f"error: {err}", file=sys.stderr)
        return USER_ERROR_EXIT
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as err:
        # The OS names the path; no traceback for a path the user typed.
        print(f"error: {err}", file=sys.stderr)
        return USER_ERROR_EXIT
    except OSError as err:
        if err.errno in BAD_PATH:  # a symlink loop, a name too long, a file where a folder is needed
            print(f"error: {err}", file=sys.stderr)
            return USER_ERROR_EXIT
        if err.errno not in DISK_FULL:
            raise
        # A full disk is the machine's state, not a bug: every write is atomic, so nothing half-written is left.
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}cannot write ({err.strerror}); free space and run again", file=sys.stderr)
        return USER_ERROR_EXIT


class MissingFileError(NerAppError, FileNotFoundError):
    """A file or folder the user named cannot be read; still a ``FileNotFoundError`` for callers."""
