"""Training throughput through Lightning's ``ThroughputMonitor``, evaluation time left out of the clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
from lightning_fabric.utilities.rank_zero import rank_zero_only
from pytorch_lightning.callbacks import ThroughputMonitor
from pytorch_lightning.trainer.states import RunningStage

from ner_app.runtime.lightning_compat import shift_stage_start, stage_throughput


class TrainingThroughput(ThroughputMonitor):
    """Lightning's monitor over training batches only: it logs ``train/device/samples_per_sec`` and
    ``train/device/items_per_sec`` over the last ``window_size`` batches, and ``rate()`` gives the whole run's
    items per second on all processes. Evaluation passes are not monitored (they time themselves, and the
    monitor would log them under step numbers counted from 0 again, which ``--resume`` cannot order), and the
    time they take is not counted as training time."""

    def __init__(
        self, batch_size_fn: Callable[[Any], int], length_fn: Callable[[Any], int], window_size: int = 20
    ) -> None:
        super().__init__(batch_size_fn=batch_size_fn, length_fn=length_fn, window_size=window_size)
        self._paused: float | None = None
        self._world_size = 1

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self._world_size = trainer.world_size

    @rank_zero_only
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._paused = time.perf_counter()

    def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
        pass

    @rank_zero_only
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._paused is not None:
            shift_stage_start(self, RunningStage.TRAINING, time.perf_counter() - self._paused)
        self._paused = None

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        pass

    def on_test_batch_end(self, *args: Any, **kwargs: Any) -> None:
        pass

    def rate(self) -> tuple[float, int] | None:
        """(items per second, items timed) over the whole training run on every process; None on ranks other
        than 0 or before a batch was timed."""
        throughput = stage_throughput(self, RunningStage.TRAINING)
        if throughput is None:
            return None
        done = throughput.compute()
        seconds, items = float(done["time"]), int(done.get("lengths", 0))
        return (items * self._world_size / seconds if seconds > 0 else 0.0), items * self._world_size
