"""What several handlers share: SIGTERM during a training run, whether an output is standard output, the gold
file's check."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError, Stopped, stop_reported


def until_sigterm(run: Callable[[], dict[str, Any]], output_dir: str) -> dict[str, Any] | None:
    """``run()``, or None after printing one line if SIGTERM stopped it.

    ``Stopped`` comes from the handler of ``run_reporting_errors``. Without that handler (outside the main
    thread, where none can be set) Lightning answers SIGTERM by ending its loop with ``SIGTERMException``, a
    ``SystemExit`` whose exit code is 0: a stopped run would look finished to the shell and to job queues.
    """
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    try:
        return run()
    except (Stopped, SIGTERMException):
        stop_reported()
        last = Path(output_dir) / "checkpoints" / "last.ckpt"
        then = (
            f"the same command with --resume continues from {last}"
            if last.is_file()
            else "no checkpoint was written yet: the same command without --resume starts it again"
        )
        print(f"stopped by SIGTERM before the run finished; {then}", file=sys.stderr)
        return None


def is_stdout(path: str) -> bool:
    """Whether an output path is this process's standard output (``-``, /dev/stdout, a link to it)."""
    from ner_app.files import output_target

    return output_target(path)[0] == "stdout"


def check_gold_file(path: str, option: str = "--gold", fmt: str | None = None) -> None:
    """The gold file of the commands that score against gold tags (``option``, as typed): a regular file (a gold
    file is read whole: a FIFO may never end, /dev/zero never does), or a brat folder (``fmt`` brat or None)."""
    from ner_app.text.annotations.splits import is_brat_folder

    if is_brat_folder(Path(path), fmt):
        return
    if Path(path).is_dir() or not Path(path).exists():
        raise NerAppError(
            f"{option} {path}: not a file (expected a gold file: CoNLL, an annotation export or a brat folder)"
        )
    if not Path(path).is_file():
        raise NerAppError(
            f"{option} {path}: not a regular file (a FIFO or a device); expected a gold file: CoNLL, an annotation export or a brat folder"
        )
