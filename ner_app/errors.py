"""One base class for a user's mistakes, and the one policy every command applies to them.

A ``NerAppError`` (bad config, bad file, refused checkpoint, ...) is reported as one line on stderr with exit
code 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


class NerAppError(ValueError):
    """Bad input from the user: the message names the file, line or key and what was expected."""


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


class MissingFileError(NerAppError, FileNotFoundError):
    """A file or folder the user named cannot be read; still a ``FileNotFoundError`` for callers."""
