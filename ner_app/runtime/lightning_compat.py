"""Lightning's private API, fenced: every name this project reaches below Lightning's public surface.

Each is a small adapter; the runtime's callbacks and loggers build on them and name no private attribute
themselves. tests/runtime/test_lightning_compat.py pins them to the supported versions (pyproject.toml):

* ``ModelCheckpoint._generate_state_key``: the key a checkpoint callback's state is filed under
  (``CheckpointUnderItsBaseKey``).
* ``ExperimentWriter._check_log_dir_exists``: where the CSV writer deletes an existing ``metrics.csv``
  (``CsvWriter.prepare_metrics_file``).
* ``CSVLogger._experiment``: the logger's writer, made on first use (``logger_writer``, ``set_logger_writer``).
* ``LightningModule._trainer``: the trainer a module is attached to, if any (``attached_trainer``; the public
  ``trainer`` property raises when there is none).
* ``ThroughputMonitor._t0s`` and ``_throughputs``, ``Throughput._time``: a stage's start time and its
  running measurements (``shift_stage_start``, ``stage_throughput``).
* ``Trainer._logger_connector``: whether the loggers write the current step (``logs_this_step``).
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from lightning_fabric.utilities.throughput import Throughput
from pytorch_lightning.callbacks import ModelCheckpoint, ThroughputMonitor
from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.loggers.csv_logs import ExperimentWriter
from pytorch_lightning.trainer.states import RunningStage

# The Lightning versions this module is checked against: pyproject.toml's range, which its test compares with.
SUPPORTED = "pytorch-lightning>=2.6"


class CheckpointUnderItsBaseKey(ModelCheckpoint):
    """A ``ModelCheckpoint`` subclass whose state is filed under ``ModelCheckpoint``'s own key, so checkpoints
    written by either class resume with the other (Lightning files a callback's state under its class name)."""

    def _generate_state_key(self, **kwargs: Any) -> str:
        return f"ModelCheckpoint{kwargs!r}"


class CsvWriter(ExperimentWriter):
    """Lightning's CSV writer with a public hook where it prepares ``metrics.csv`` (by default: deletes an
    existing one, with a warning)."""

    def _check_log_dir_exists(self) -> None:
        self.prepare_metrics_file()

    def prepare_metrics_file(self) -> None:
        ExperimentWriter._check_log_dir_exists(self)


def logger_writer(logger: CSVLogger) -> ExperimentWriter | None:
    """The writer ``logger`` made so far (None before its first use)."""
    writer = logger._experiment
    return writer if isinstance(writer, ExperimentWriter) else None


def set_logger_writer(logger: CSVLogger, writer: ExperimentWriter) -> None:
    """Give ``logger`` the writer it would otherwise make on first use."""
    logger._experiment = writer


def attached_trainer(module: pl.LightningModule) -> pl.Trainer | None:
    """The trainer ``module`` is attached to; None outside one (a checkpoint loaded for inspection)."""
    return module._trainer


def logs_this_step(trainer: pl.Trainer) -> bool:
    """Whether the loggers write the values logged in the current training step (every ``log_every_n_steps``-th
    step, and the last one): values logged in other steps reach only the progress bar."""
    return bool(trainer._logger_connector.should_update_logs)


def shift_stage_start(monitor: ThroughputMonitor, stage: RunningStage, seconds: float) -> None:
    """Move ``stage``'s start time later by ``seconds`` (time that should not count); no-op before it started."""
    if stage in monitor._t0s:
        monitor._t0s[stage] += seconds


def stage_throughput(monitor: ThroughputMonitor, stage: RunningStage) -> Throughput | None:
    """``stage``'s running measurements, or None before the monitor timed a batch of it."""
    throughput = monitor._throughputs.get(stage)
    return throughput if throughput is not None and throughput._time else None


__all__ = [
    "SUPPORTED",
    "CheckpointUnderItsBaseKey",
    "CsvWriter",
    "attached_trainer",
    "logger_writer",
    "logs_this_step",
    "set_logger_writer",
    "shift_stage_start",
    "stage_throughput",
]
