"""The run folder: one run at a time (a lock), no silent reuse of an old run, checkpoints tied to their run,
and a training log that survives ``--resume`` (docs/reliability.md).
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

import pytorch_lightning as pl
from lightning_fabric.utilities.rank_zero import rank_zero_only
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.loggers.csv_logs import ExperimentWriter
from pytorch_lightning.loggers.logger import rank_zero_experiment

from ner_app.config.schema import RESUMABLE, BilmPretrainConfig, TrainConfig, keys_with
from ner_app.errors import MissingFileError, NerAppError
from ner_app.files import atomic_path
from ner_app.runtime.checkpoint import load_checkpoint
from ner_app.runtime.lightning_compat import CsvWriter, logger_writer, set_logger_writer

LOCK = ".lock"
IDENTITY_KEY = "ner_app_run"  # checkpoint entry: the run's config and data fingerprint
# Entries a run that never reached its first checkpoint leaves; a fresh run may start over in such a folder.
_RESTARTABLE = {LOCK, "config.yaml", "logs", "checkpoints", "vocab.txt"}
# Keys --resume may change: how long and how verbosely to go on, never what is trained on what (the fields
# with RESUMABLE metadata in both config trees).
RESUMABLE_KEYS = set(keys_with(RESUMABLE, TrainConfig, BilmPretrainConfig))


class RunFolderError(NerAppError):
    """The run folder is in use, holds another run, or its checkpoint belongs to another run."""


@contextmanager
def locked_run_folder(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir`` (flock: released by the OS when the process dies, even by kill -9).

    The lock file goes on every exit path (a refused run leaves nothing in a folder it was given), and a folder
    this call made is removed again when it is still empty. The file is removed while the lock is held, so a
    process that opened it before then finds, once it holds the lock, that its file is no longer the one at
    ``run_dir/.lock``, and opens that one instead (``_lock``)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"output_dir {run_dir} is a file, expected a folder")
    made = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with _lock(run_dir / LOCK) as handle:
            try:
                yield
            finally:
                with suppress(FileNotFoundError):
                    os.unlink(run_dir / LOCK)  # still ours: the lock is held
                fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        if made and run_dir.is_dir() and not any(run_dir.iterdir()):
            with suppress(OSError):
                run_dir.rmdir()


@contextmanager
def _lock(path: Path) -> Iterator[BinaryIO]:
    """``path`` open and flocked, and still the file at ``path`` once locked (see ``locked_run_folder``)."""
    while True:
        with open(path, "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunFolderError(
                    f"{path.parent}: another run is using this output_dir; wait for it or choose another output_dir"
                ) from None
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            held = os.fstat(handle.fileno())
            if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
                yield handle
                return
            fcntl.flock(handle, fcntl.LOCK_UN)  # its holder removed it as we opened it: take the new one


@contextmanager
def opened_run(run_dir: Path, resume: bool) -> Iterator[Path]:
    """The preamble of every training command: ``--resume`` needs ``checkpoints/last.ckpt``; the folder is then
    claimed (``claimed_run_folder``) for the block, which gets the path of the last checkpoint."""
    last = run_dir / "checkpoints" / "last.ckpt"
    if resume and not last.is_file():
        try:  # the advice must not send the user back here: a fresh start must be possible where it points
            check_fresh_start(run_dir)
            advice = "start afresh without --resume"
        except RunFolderError:
            advice = "start afresh in a new output_dir: this one holds an earlier run's other files"
        raise MissingFileError(f"--resume: no checkpoint at {last} ({advice})")
    with claimed_run_folder(run_dir, resume):
        yield last


def resumed_step(last: Path, identity: dict[str, Any], max_epochs: int | None = None) -> int:
    """The step ``last`` was written at, after refusing a stale or foreign checkpoint (``check_identity``)
    and a ``max_epochs`` below the epochs it has trained (Lightning would stop with a traceback, or end at
    once): the CSV log keeps its rows below it. Read before anything is built."""
    saved = load_checkpoint(last)
    check_identity(saved, identity, last)
    if max_epochs is not None and (done := epochs_trained(saved)) > max_epochs:
        raise RunFolderError(
            f"trainer.max_epochs is {max_epochs}, but {last} has trained {done} epochs; --resume goes on to "
            f"trainer.max_epochs: expected at least {done}"
        )
    return int(saved.get("global_step", 0))


def epochs_trained(checkpoint: dict[str, Any]) -> int:
    """The epochs a Lightning checkpoint has trained (the one it was written in, at its end, counted)."""
    try:
        progress = checkpoint["loops"]["fit_loop"]["epoch_progress"]["current"]
        return int(progress["processed"])
    except (KeyError, TypeError, ValueError):  # an older layout: the epoch it was written in, 0-based
        epoch = checkpoint.get("epoch", 0)
        return epoch + 1 if isinstance(epoch, int) else 0


@contextmanager
def claimed_run_folder(run_dir: Path, resume: bool) -> Iterator[None]:
    """The run folder for this process: global rank 0 locks it and, for a fresh run, checks that it is free.

    Another DDP rank (started by rank 0, or beside it by torchrun or SLURM) writes nothing and takes no lock.
    """
    if getattr(rank_zero_only, "rank", 0) != 0:
        yield
        return
    with locked_run_folder(run_dir):  # one run per folder (docs/reliability.md)
        sweep_temporary_files(run_dir)
        if not resume:
            check_fresh_start(run_dir)
        yield


def sweep_temporary_files(run_dir: Path) -> list[Path]:
    """Remove what a killed run of this folder left half-written: the hidden ``.NAME.*.tmp`` files and folders
    of the atomic writes (``ner_app.files``), the ``.NAME.old-PID`` folder an export was replacing, and
    pretraining's ``last.ckpt.tmp``. Called with the folder's lock held, so no live run is writing them."""
    removed = []
    for folder in (run_dir, run_dir / "checkpoints"):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            name = path.name
            ours = (
                name.startswith(".") and (name.endswith(".tmp") or ".old-" in name)
            ) or name == "last.ckpt.tmp"
            if ours and not path.is_symlink():
                shutil.rmtree(path) if path.is_dir() else path.unlink()
                removed.append(path)
    return removed


def has_checkpoint(run_dir: Path) -> bool:
    folder = run_dir / "checkpoints"
    return folder.is_dir() and any(p.suffix == ".ckpt" for p in folder.iterdir())


def check_fresh_start(run_dir: Path) -> None:
    """A run without --resume needs an empty folder, or one left by a run killed before its first checkpoint."""
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise RunFolderError(f"output_dir {run_dir} is a file, expected a folder")
    foreign = sorted(p.name for p in run_dir.iterdir() if p.name not in _RESTARTABLE)
    if foreign or has_checkpoint(run_dir):
        what = f"it holds {', '.join(foreign[:4])}" if foreign else "it holds checkpoints of an earlier run"
        raise RunFolderError(
            f"output_dir {run_dir} is not empty ({what}): add --resume to continue that run, or choose a new "
            "output_dir (or delete the folder) to start afresh"
        )


def data_fingerprint(paths: list[Path]) -> str:
    """sha256 over the names and bytes of the files a run trains on."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"\x00{path.name}\x00".encode())
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def run_identity(
    config: dict[str, Any], data: str, defaults: dict[str, Any] | None = None, pinned: Iterable[str] = ()
) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the config (without ``RESUMABLE_KEYS``, except the
    ``pinned`` ones this run cannot change) and the data.

    ``defaults`` (the schema's default tree) lets ``check_identity`` accept a checkpoint written before a key
    existed, as long as the key keeps its default (which is what the older program did).
    """
    flat, kept = flatten_tree(config), set(pinned)
    identity = {"config": {k: v for k, v in flat.items() if k not in RESUMABLE_KEYS - kept}, "data": data}
    return {**identity, "defaults": flatten_tree(defaults)} if defaults is not None else identity


def check_identity(checkpoint: dict[str, Any], expected: dict[str, Any], path: Path) -> None:
    """Refuse a checkpoint written by another config or on other data, naming what differs."""
    found = checkpoint.get(IDENTITY_KEY)
    if not isinstance(found, dict):
        raise RunFolderError(f"{path}: this checkpoint carries no run identity (written by another program?)")
    changed, shown = config_changes(found, expected)
    if changed:
        # a resumable key that differs is one this run keeps in its identity (``run_identity``'s ``pinned``)
        pinned = [k for k in changed if k in RESUMABLE_KEYS]
        may = (
            f"{pinned[0]} stays as it was in this run: its learning-rate schedule is laid out over it"
            if pinned
            else f"it may change {', '.join(sorted(k for k in RESUMABLE_KEYS if '.' in k)[:4])}, ..."
        )
        raise RunFolderError(
            f"{path}: written by a run with another config ({shown}); --resume only continues the same run "
            f"({may})"
        )
    if found.get("data") != expected["data"]:
        raise RunFolderError(f"{path}: written by a run on other data (the data files' fingerprint differs)")


def config_changes(found: dict[str, Any], expected: dict[str, Any]) -> tuple[list[str], str]:
    """The config keys in which a checkpoint's run identity differs from ``expected`` (a key added since at
    its default does not count), and the first three as ``key: old -> new``."""
    old, new, defaults = found.get("config", {}), expected["config"], expected.get("defaults", {})
    added_at_default = {k for k in new.keys() - old.keys() if k in defaults and new[k] == defaults[k]}
    changed = sorted(
        k for k in old.keys() | new.keys() if old.get(k) != new.get(k) and k not in added_at_default
    )
    return changed, ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed[:3])


def flatten_tree(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict as {"section.key": plain JSON value}."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten_tree(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = json.loads(json.dumps(value))  # plain JSON values only
    return out


class RunIdentity(Callback):
    """Stamps every checkpoint with the run's identity (``run_identity``)."""

    def __init__(self, identity: dict[str, Any]) -> None:
        self.identity = identity

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint[IDENTITY_KEY] = self.identity


class _KeepingWriter(CsvWriter):
    """Lightning's CSV writer deletes an existing ``metrics.csv``; this one keeps its rows before ``keep_below``
    (the resumed checkpoint's global step: later rows were logged after it and are logged again)."""

    def __init__(self, log_dir: str, keep_below: int | None) -> None:
        self._keep_below = keep_below
        super().__init__(log_dir)

    def prepare_metrics_file(self) -> None:
        path = Path(self.metrics_file_path)
        if self._keep_below is None or not path.is_file():
            super().prepare_metrics_file()
            return
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            keys, rows = list(reader.fieldnames or []), list(reader)
        rows = [r for r in rows if r.get("step", "").isdigit() and int(r["step"]) < self._keep_below]
        with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)
        self.metrics_keys = keys


class ResumableCSVLogger(CSVLogger):
    """``CSVLogger`` whose ``metrics.csv`` keeps the rows of the run before ``--resume`` (``keep_below`` set)."""

    def __init__(self, save_dir: Path, name: str, keep_below: int | None = None) -> None:
        super().__init__(save_dir, name=name, version="")
        self._keep_below = keep_below

    @property
    @rank_zero_experiment  # as CSVLogger's: under DDP only rank 0 trims and writes metrics.csv (two would race)
    def experiment(self) -> ExperimentWriter:
        writer = logger_writer(self)
        if writer is None:
            os.makedirs(self.root_dir, exist_ok=True)
            writer = _KeepingWriter(self.log_dir, self._keep_below)
            set_logger_writer(self, writer)
        return writer
