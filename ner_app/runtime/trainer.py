"""The one Trainer builder: every Lightning run (the tagger's, pretraining's, an evaluation) is made here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from lightning_fabric.utilities.data import sized_len
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.loggers import Logger, TensorBoardLogger

from ner_app.config.schema import BilmTrainConfig, RuntimeConfig
from ner_app.errors import NerAppError, raise_if_stopped
from ner_app.runtime.checkpoint import SafeCheckpointIO
from ner_app.runtime.devices import choose_precision
from ner_app.runtime.log_progress import lightning_progress, silence_known_warnings
from ner_app.runtime.run_dir import ResumableCSVLogger


def build_trainer(
    runtime: RuntimeConfig,
    callbacks: list[Callback],
    run_dir: Path | None = None,
    keep_below: int | None = None,
    grad_clip: float | None = None,
    **loops: Any,
) -> pl.Trainer:
    """A Trainer on ``runtime``'s devices and precision, checkpoints loaded without pickle, the run's CSV log in
    ``run_dir/logs`` (none without ``run_dir``: an evaluation) keeping the rows below step ``keep_below``, and
    progress suited to where stderr goes. ``loops``: the run's own loop bounds (``max_epochs``, ``max_steps``,
    ``val_check_interval``, ...)."""
    accelerator, precision = choose_precision(runtime.accelerator, runtime.precision)
    silence_known_warnings()
    section = "train" if isinstance(runtime, BilmTrainConfig) else "trainer"
    require_logger(runtime.logger, f"{section}.logger")
    max_time = {"minutes": runtime.max_time_minutes} if runtime.max_time_minutes else None
    return pl.Trainer(
        accelerator=accelerator,
        devices=runtime.devices,
        num_nodes=runtime.num_nodes,
        strategy=runtime.strategy,
        precision=precision,  # type: ignore[arg-type]  # a str Lightning accepts; its stubs list literals
        max_time=max_time,  # type: ignore[arg-type]  # minutes may be fractional; Lightning takes a float
        gradient_clip_val=grad_clip,
        gradient_clip_algorithm="norm",
        callbacks=[
            *callbacks,
            *lightning_progress(runtime.enable_progress_bar),
            FittedLogInterval(runtime.log_every_n_steps),
            HeedStops(),
        ],
        logger=run_loggers(runtime.logger, run_dir, keep_below) if run_dir is not None else False,
        plugins=[SafeCheckpointIO()],
        log_every_n_steps=runtime.log_every_n_steps,
        enable_progress_bar=runtime.enable_progress_bar,
        num_sanity_val_steps=0,
        enable_model_summary=False,
        default_root_dir=run_dir,
        use_distributed_sampler=False,  # every loader of this project shards by rank itself
        **loops,
    )


class HeedStops(Callback):
    """After every batch, raise a Ctrl-C or SIGTERM whose first raise Python dropped (``raise_if_stopped``), so
    that a fit or an evaluation still stops."""

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        raise_if_stopped()

    def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
        raise_if_stopped()

    def on_test_batch_end(self, *args: Any, **kwargs: Any) -> None:
        raise_if_stopped()

    def on_predict_batch_end(self, *args: Any, **kwargs: Any) -> None:
        raise_if_stopped()


class FittedLogInterval(Callback):
    """Lightning logs a training step every ``log_every_n_steps`` optimiser steps, and warns when an epoch has
    fewer batches than that. On a DataModule's data (the tagger's epochs) the interval used is at most half an
    epoch's batches (after ``limit_train_batches``, on this rank): an epoch of two or more batches then logs at
    least two steps, which the run report's throughput needs, and Lightning has nothing to warn about. A data
    set of at least twice the interval asked for keeps it. On a loader passed to ``fit`` (pretraining's streams,
    counted in steps across epochs) the caller sets ``batches`` (``fit_log_interval``) and the interval is at
    most one epoch's batches, so a corpus of at least one interval keeps it. Set before the fit loop reads its
    data."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.batches: int | None = None  # one epoch's batches on this rank of a loader passed to fit

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        batches = training_batches(trainer)
        if batches is not None:
            every = fitted_interval(self.every, batches)
        elif self.batches is not None:
            every = max(1, min(self.every, limited(trainer, self.batches)))
        else:
            every = self.every
        trainer.log_every_n_steps = every  # type: ignore[attr-defined]  # set by Lightning at init, not declared


def fit_log_interval(trainer: pl.Trainer, batches: int) -> None:
    """Fit the logging interval of ``trainer`` to a loader of ``batches`` batches an epoch on this rank, passed
    to ``fit`` directly (not through a DataModule, whose length ``FittedLogInterval`` reads itself)."""
    for callback in trainer.callbacks:  # type: ignore[attr-defined]  # Lightning's, not declared on Trainer
        if isinstance(callback, FittedLogInterval):
            callback.batches = batches


def fitted_interval(every: int, batches: int) -> int:
    """The logging interval for ``batches`` training batches an epoch when ``every`` was asked for."""
    return max(1, min(every, batches // 2))


def training_batches(trainer: pl.Trainer) -> int | None:
    """The training batches of one epoch on this rank, as Lightning will count them; None when the data is not
    a DataModule's (pretraining's streams) or has no length."""
    datamodule = getattr(trainer, "datamodule", None)  # Lightning's, set by fit (not declared on Trainer)
    if datamodule is None:
        return None
    batches = sized_len(datamodule.train_dataloader())
    return None if batches is None else limited(trainer, batches)


def limited(trainer: pl.Trainer, batches: int) -> int:
    """``batches`` after the trainer's ``limit_train_batches``."""
    limit = trainer.limit_train_batches
    if isinstance(limit, int):
        return min(batches, limit)
    return batches if limit is None else int(batches * limit)


def require_logger(name: str, key: str) -> None:
    """Refuse, in one line and before anything runs, a logger whose package is not installed."""
    if name != "tensorboard":
        return
    try:
        import torch.utils.tensorboard  # noqa: F401  (the writer Lightning's TensorBoardLogger uses)
    except ImportError:
        raise NerAppError(
            f"{key}=tensorboard: the tensorboard package is not installed (pip install tensorboard); "
            f"{key}=csv logs without it"
        ) from None


def run_loggers(name: str, run_dir: Path, keep_below: int | None) -> list[Logger]:
    """The run's CSV log ``run_dir/logs/metrics.csv`` (always: the run report reads it), first, so that it is
    Lightning's ``trainer.logger``; with ``tensorboard`` also TensorBoard event files in ``logs/tensorboard``.
    A file where one of these folders goes is one line (the OS's own error would be a bare ``[Errno 17]``)."""
    for folder in (run_dir / "logs", *([run_dir / "logs" / "tensorboard"] if name == "tensorboard" else [])):
        if folder.exists() and not folder.is_dir():
            raise NerAppError(
                f"{folder}: is a file, expected the folder where the run writes its {folder.name}; "
                "move the file away or choose another output_dir"
            )
    loggers: list[Logger] = [ResumableCSVLogger(run_dir, "logs", keep_below)]
    if name == "tensorboard":
        loggers.append(
            TensorBoardLogger(run_dir, name="logs", version="tensorboard", default_hp_metric=False)
        )
    return loggers


def evaluation_trainer() -> pl.Trainer:
    """One CPU process in fp32, no log, no bar: an evaluation outside a training run (``bilm-perplexity``)."""
    return build_trainer(RuntimeConfig(accelerator="cpu", precision="32-true", enable_progress_bar=False), [])
