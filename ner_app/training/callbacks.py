"""Callbacks: atomic checkpoints and per-epoch throughput."""

from __future__ import annotations

import os
import time

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback, ModelCheckpoint


class AtomicModelCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that writes to a temporary file and renames it, so a crash never leaves half a file."""

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        tmp = f"{filepath}.tmp"
        trainer.save_checkpoint(tmp, self.save_weights_only)
        if trainer.is_global_zero:
            os.replace(tmp, filepath)
        self._last_global_step_saved = trainer.global_step
        self._last_checkpoint_saved = filepath
        for logger in trainer.loggers:
            logger.after_save_checkpoint(self)


class ThroughputMonitor(Callback):
    """Logs sentences/s and tokens/s of every training epoch and every validation pass."""

    def __init__(self) -> None:
        self._start = {"train": 0.0, "val": 0.0}
        self._counts = {"train": [0, 0], "val": [0, 0]}

    def _begin(self, phase: str) -> None:
        self._start[phase] = time.perf_counter()
        self._counts[phase] = [0, 0]

    def _add(self, phase: str, batch: dict) -> None:
        self._counts[phase][0] += len(batch["tokens"])
        self._counts[phase][1] += int(batch["mask"].sum())

    def _end(self, phase: str, pl_module: pl.LightningModule) -> None:
        seconds = max(time.perf_counter() - self._start[phase], 1e-9)
        sentences, tokens = self._counts[phase]
        if sentences:
            pl_module.log_dict({f"{phase}_sent_per_s": sentences / seconds, f"{phase}_tok_per_s": tokens / seconds,
                                f"{phase}_epoch_s": seconds})  # fmt: skip

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._begin("train")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
        self._add("train", batch)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end("train", pl_module)

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._begin("val")

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ) -> None:  # noqa: ANN001
        self._add("val", batch)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._end("val", pl_module)
