"""One base class for a user's mistakes, and the one policy every command applies to them.

A ``NerAppError`` (bad config, bad file, refused checkpoint, ...) is reported as one line on stderr with exit
code 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable


class NerAppError(ValueError):
    """Bad input from the user: the message names the file, line or key and what was expected."""


# errno values of a write that failed for want of space (EFBIG: a file-size limit).
DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}

# Exit code of every command for bad input (argparse uses the same code for bad arguments).
USER_ERROR_EXIT = 2


def run_reporting_errors(command: Callable[[], int]) -> int:
    """Run ``command``; turn a user's mistake into one ``error: ...`` line and exit code 2."""
    try:
        return command()
    except NerAppError as err:
        print(f"error: {err}", file=sys.stderr)
        return USER_ERROR_EXIT
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as err:
        # The OS names the path; no traceback for a path the user typed.
        print(f"error: {err}", file=sys.stderr)
        return USER_ERROR_EXIT
    except OSError as err:
        if err.errno not in DISK_FULL:
            raise
        # A full disk is the machine's state, not a bug: every write is atomic, so nothing half-written is left.
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}cannot write ({err.strerror}); free space and run again", file=sys.stderr)
        return USER_ERROR_EXIT


class MissingFileError(NerAppError, FileNotFoundError):
    """A file or folder the user named cannot be read; still a ``FileNotFoundError`` for callers."""
