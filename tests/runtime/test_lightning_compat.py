"""Lightning's private API that the runtime reaches (``ner_app/runtime/lightning_compat.py``), pinned to the
supported range: each adapter does what the runtime relies on, against the real Lightning classes."""

from __future__ import annotations

import csv
import re
import time
from pathlib import Path

import pytest
import pytorch_lightning as pl
from lightning_fabric.utilities.throughput import Throughput
from packaging.requirements import Requirement
from pytorch_lightning.callbacks import ModelCheckpoint, ThroughputMonitor
from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.trainer.states import RunningStage

from ner_app.runtime.lightning_compat import (
    SUPPORTED,
    CheckpointUnderItsBaseKey,
    CsvWriter,
    attached_trainer,
    logger_writer,
    logs_this_step,
    set_logger_writer,
    shift_stage_start,
    stage_throughput,
)
from ner_app.runtime.moved_checkpoint import MovableCheckpoint
from ner_app.runtime.run_dir import ResumableCSVLogger
from tests.versions import installed_in_range, supported_range


def test_the_compat_module_states_pyprojects_range_and_lightning_is_in_it() -> None:
    assert Requirement(SUPPORTED).specifier == supported_range("pytorch-lightning")
    installed_in_range("pytorch-lightning")


PACKAGE = Path(__file__).resolve().parents[2] / "ner_app"
# Lightning's private names the project reaches (as attributes, not calls of a method of ours of that name);
# each may appear in the compat module only.
PRIVATE = re.compile(
    r"_generate_state_key|_check_log_dir_exists|_logger_connector"
    r"|\.(_experiment|_t0s|_throughputs|_time|_trainer)\b(?!\s*\()"
)


def test_lightnings_private_names_appear_in_the_compat_module_only() -> None:
    outside = [
        f"{path.relative_to(PACKAGE)}: {found.group()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "lightning_compat.py"
        for found in PRIVATE.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not outside, outside


def test_a_module_outside_a_trainer_has_none_and_inside_its_trainer() -> None:
    module = pl.LightningModule()
    assert attached_trainer(module) is None
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    module.trainer = trainer
    assert attached_trainer(module) is trainer


def test_a_step_is_logged_at_the_interval_and_never_without_one() -> None:
    def trainer(every: int) -> pl.Trainer:
        return pl.Trainer(
            logger=False, enable_checkpointing=False, enable_progress_bar=False, log_every_n_steps=every
        )

    assert logs_this_step(trainer(1))  # outside a loop every step counts as logged
    assert not logs_this_step(trainer(0))  # no interval: no step is written


def test_a_checkpoint_subclass_keeps_model_checkpoints_state_key(tmp_path: Path) -> None:
    plain = ModelCheckpoint(dirpath=tmp_path, monitor="val", mode="min")
    for subclass in (CheckpointUnderItsBaseKey, MovableCheckpoint):
        ours = subclass(dirpath=tmp_path, monitor="val", mode="min")
        assert ours.state_key == plain.state_key and ours.state_key.startswith("ModelCheckpoint{")


def test_the_csv_writer_prepares_metrics_through_its_hook(tmp_path: Path) -> None:
    calls = []

    class Counting(CsvWriter):
        def prepare_metrics_file(self) -> None:
            calls.append(self.metrics_file_path)
            super().prepare_metrics_file()

    (tmp_path / "metrics.csv").write_text("step,loss\n0,1.0\n")
    with pytest.warns(UserWarning):  # Lightning's own default: it warns, then starts metrics.csv afresh
        writer = Counting(str(tmp_path))
    assert calls == [writer.metrics_file_path] and not (tmp_path / "metrics.csv").exists()


def test_a_loggers_writer_is_read_and_set(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path, name="run", version="")
    assert logger_writer(logger) is None  # made on first use
    writer = CsvWriter(str(tmp_path / "run"))
    set_logger_writer(logger, writer)
    assert logger_writer(logger) is writer and logger.experiment is writer


def test_the_resumable_logger_keeps_the_rows_before_the_resumed_step(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "metrics.csv").write_text("step,loss\n0,1.0\n5,0.5\n9,0.2\n")
    logger = ResumableCSVLogger(tmp_path, name="logs", keep_below=6)
    assert isinstance(logger.experiment, CsvWriter) and logger_writer(logger) is logger.experiment
    with open(folder / "metrics.csv", newline="") as f:
        assert [row["step"] for row in csv.DictReader(f)] == ["0", "5"]


def test_a_stage_start_moves_and_its_measurements_show_once_timed() -> None:
    monitor = ThroughputMonitor(batch_size_fn=len, window_size=2)
    shift_stage_start(monitor, RunningStage.TRAINING, 5.0)  # not started: nothing to move
    assert stage_throughput(monitor, RunningStage.TRAINING) is None
    start = time.perf_counter()
    # What the monitor records when a stage begins, spelled out: the private fields the adapters read.
    monitor._t0s[RunningStage.TRAINING] = start
    monitor._throughputs[RunningStage.TRAINING] = Throughput(window_size=2)
    shift_stage_start(monitor, RunningStage.TRAINING, 5.0)
    assert monitor._t0s[RunningStage.TRAINING] == start + 5.0
    assert stage_throughput(monitor, RunningStage.TRAINING) is None  # no batch timed yet
    monitor._throughputs[RunningStage.TRAINING].update(time=1.0, batches=1, samples=4, lengths=40)
    found = stage_throughput(monitor, RunningStage.TRAINING)
    assert found is not None and found.compute()["time"] == 1.0
