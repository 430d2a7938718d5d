"""Lightning's progress display when stderr is a log file or a pipe: plain lines, no carriage returns
(``ner_app.progress`` has the bars of the loops outside Lightning)."""

from __future__ import annotations

import logging
import math
import re
import sys
import time
import warnings
from typing import Any, TextIO

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.callbacks.progress import ProgressBar

from ner_app.progress import STEPS, stderr_is_terminal


class EpochLines(ProgressBar):
    """Lightning's progress display for logs: a line per 10% of a training epoch and one at its end, or per 10%
    of ``max_steps`` when the run is bounded by steps (biLM pretraining), with the logged metrics; nothing for
    evaluation loops."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self.stream, self._enabled = stream, True
        self._start = time.perf_counter()
        self._reported = 0  # tenths of max_steps already written
        self._epoch_reported = 0  # tenths of the current epoch's batches already written

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _write(self, trainer: pl.Trainer, where: str) -> None:
        if not (self._enabled and trainer.is_global_zero):
            return
        shown = []
        for name, value in sorted(trainer.callback_metrics.items()):
            number = value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value
            if isinstance(number, int | float) and "/" not in name:  # "/": the throughput monitor's many keys
                shown.append(f"{name} {number:.4g}")
        stream = self.stream or sys.stderr
        elapsed = time.perf_counter() - self._start
        stream.write(f"{where}: {'  '.join(shown) or 'no metrics yet'} ({elapsed:.1f} s)\n")
        stream.flush()

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.perf_counter()
        if trainer.max_steps > 0:  # a resumed run does not repeat the tenths it already reported
            self._reported = math.floor(STEPS * trainer.global_step / trainer.max_steps)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_reported = 0

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.max_steps <= 0:  # bounded by epochs: a line per 10% of the epoch, the epoch line at 100%
            batches = trainer.num_training_batches
            if not math.isfinite(batches) or batches < 1:
                return
            tenths = math.floor(STEPS * (batch_idx + 1) / batches)
            if self._epoch_reported < tenths < STEPS:
                self._epoch_reported = tenths
                epochs = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
                where = f"epoch {trainer.current_epoch + 1}{epochs} {10 * tenths}% (batch {batch_idx + 1}/{batches})"
                self._write(trainer, f"{where} step {trainer.global_step}")
            return
        tenths = min(STEPS, math.floor(STEPS * trainer.global_step / trainer.max_steps))
        if tenths > self._reported:
            self._reported = tenths
            self._write(trainer, f"step {trainer.global_step}/{trainer.max_steps} ({10 * tenths}%)")

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.max_steps > 0:  # bounded by steps: the step lines report
            return
        epochs = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        self._write(trainer, f"epoch {trainer.current_epoch + 1}{epochs} step {trainer.global_step}")


def lightning_progress(enabled: bool) -> list[Callback]:
    """The callbacks to add to a Trainer built with ``enable_progress_bar=enabled``: Lightning's own tqdm bar
    on a terminal (nothing to add), ``EpochLines`` when stderr is a log file or a pipe."""
    return [EpochLines()] if enabled and not stderr_is_terminal() else []


# Lightning warnings that are known and intended here, with the reason each one is:
KNOWN_WARNINGS = (
    # The frozen biLM of ELMo stays in eval mode (no dropout) while the tagger trains: ``Elmo.train``.
    r"Found \d+ module\(s\) in eval mode at the start of training",
    # Lightning 2.6's pytree helper on torch 2.13: a deprecation inside Lightning, not in this code.
    r".*treespec, LeafSpec",
    # Every --resume: the folder holds the run's own checkpoints. A fresh run refuses a non-empty output_dir
    # before Lightning sees it (``claimed_run_folder``), so the warning never has anything else to say here.
    r"Checkpoint directory .* exists and is not empty",
)


# Lightning's device summary on a machine without a GPU: "GPU available: False, used: False" and the same for
# TPUs (and HPUs), which say nothing on a CPU run; with a GPU they are kept (which device the run used).
_ABSENT_DEVICE = re.compile(r"^[A-Z]PU available: False")


class NoProductTips(logging.Filter):
    """Drops Lightning's product tips ("💡 Tip: ... install litlogger"): an advert, not about this run; and
    its device summary where no GPU exists (``_ABSENT_DEVICE``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if message.startswith("💡 Tip"):
            return False
        return not (_ABSENT_DEVICE.match(message) and not torch.cuda.is_available())


def silence_known_warnings() -> None:
    """Keep the run's log to what a user can act on: ignore the ``KNOWN_WARNINGS`` and Lightning's tips
    (and nothing else)."""
    for message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    # Lightning's rank-zero info lines come from one of these loggers (whichever package set it last).
    for name in ("pytorch_lightning.utilities.rank_zero", "lightning_fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, NoProductTips) for f in logger.filters):
            logger.addFilter(NoProductTips())
