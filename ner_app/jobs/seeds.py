"""``train --seeds 1-5 [--parallel N]``: one run of the config per seed, each in ``output_dir/seedN``, then the
compare table over them (docs/configuration.md#several-seeds).

The sweep is resumable as each run is: a seed whose folder holds a finished run of this config is skipped, one
with a checkpoint continues from it (``--resume``), any other starts. Seeds run one after another in this
process, or N at a time as child processes of one thread each, whose lines are shown prefixed by their seed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from ner_app.config.load import TrainConfig
from ner_app.errors import NerAppError
from ner_app.train.metrics import RunMetrics

MAX_SEEDS = 1000  # a sweep larger than this is a typo (1-10000 for 1-100)
MAX_SEED = 2**32 - 1  # the range every RNG that ``seed`` seeds accepts
_PART = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,10}))?")  # ASCII digits; 10 of them pass 2**32


class SeedsError(NerAppError):
    """A bad ``--seeds`` or ``--parallel``, or a seed folder that holds something else."""


def parse_seeds(text: str) -> list[int]:
    """``1-5``, ``1,3,5`` or ``1-3,7`` as the list of seeds, in the order given; one ``SeedsError`` otherwise."""
    seeds: list[int] = []
    shown = repr(text if len(text) <= 40 else text[:37] + "...")  # the spec is named, never pasted whole
    for part in text.split(","):
        match = _PART.fullmatch(part.strip())
        if match is None:
            raise SeedsError(
                f"--seeds {shown}: expected seeds such as 1-5, 1,3,5 or 1-3,7, found {part[:20]!r}"
            )
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first:
            raise SeedsError(
                f"--seeds {shown}: the range {part.strip()} runs backwards (write {last}-{first})"
            )
        if last > MAX_SEED or len(seeds) + last - first + 1 > MAX_SEEDS:
            raise SeedsError(f"--seeds {shown}: expected at most {MAX_SEEDS} seeds, each at most {MAX_SEED}")
        seeds.extend(range(first, last + 1))
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise SeedsError(f"--seeds {shown}: seed {repeated[0]} is named twice")
    return seeds


@dataclass(frozen=True)
class SeedRun:
    """One seed of the sweep: its config, folder and what to do there."""

    seed: int
    cfg: TrainConfig
    state: str  # "finished" (skipped), "resume" (from checkpoints/last.ckpt) or "start"

    @property
    def folder(self) -> Path:
        return Path(self.cfg.output_dir)


def plan(cfg: TrainConfig, seeds: Sequence[int]) -> list[SeedRun]:
    """Each seed's config (``seed``, ``output_dir/seedN``) and the state its folder is in."""
    runs = []
    for seed in seeds:
        one = replace(cfg, seed=seed, output_dir=str(Path(cfg.output_dir) / f"seed{seed}"))
        runs.append(SeedRun(seed, one, _state(one)))
    return runs


def _state(cfg: TrainConfig) -> str:
    folder = Path(cfg.output_dir)
    if _finished(folder):
        _check_same_recipe(cfg, folder)  # a finished run of another config must not stand in for this one
        return "finished"
    return "resume" if (folder / "checkpoints" / "last.ckpt").is_file() else "start"


def _finished(folder: Path) -> bool:
    """metrics.json holds both splits' scores and the export that follows it is there (a run stopped between
    the two is continued: its resume only evaluates and exports again)."""
    try:
        RunMetrics.read(folder / "metrics.json")
    except NerAppError:
        return False
    return (folder / "export" / "model.safetensors").is_file()


def _check_same_recipe(cfg: TrainConfig, folder: Path) -> None:
    """The finished run's identity (its last checkpoint: config and data fingerprint) must be this seed's,
    as ``--resume`` requires of a checkpoint it continues."""
    from ner_app.runtime.checkpoint import load_checkpoint
    from ner_app.runtime.run_dir import IDENTITY_KEY, config_changes  # Lightning: after the early checks
    from ner_app.train.run import run_identity_of

    last = folder / "checkpoints" / "last.ckpt"
    if not last.is_file():
        raise SeedsError(
            f"{folder}: holds metrics.json but no checkpoints/last.ckpt; choose another output_dir"
        )
    found, expected = load_checkpoint(last).get(IDENTITY_KEY), run_identity_of(cfg)
    if not isinstance(found, dict):
        raise SeedsError(
            f"{last}: carries no run identity (written by another program?); choose another output_dir"
        )
    changed, shown = config_changes(found, expected)
    other = (
        f"another config ({shown})"
        if changed
        else "other data"
        if found.get("data") != expected["data"]
        else None
    )
    if other:
        raise SeedsError(
            f"{folder}: holds a finished run of {other}; choose another output_dir, or delete that folder to "
            "train the seed again"
        )


def check_sweep(cfg: TrainConfig, parallel: int | None) -> None:
    """The sweep's own limits: one process per seed."""
    t = cfg.trainer
    if t.devices * t.num_nodes > 1:
        raise SeedsError(
            f"--seeds: each seed runs in one process, found trainer.devices x trainer.num_nodes = "
            f"{t.devices * t.num_nodes}; run the seeds one by one with seed=N to train each with DDP"
        )
    if parallel is not None and parallel < 1:
        raise SeedsError(f"--parallel: expected an integer >= 1, found {parallel}")


def announce(run: SeedRun, index: int, total: int) -> None:
    what = {
        "finished": "finished earlier, skipped",
        "resume": "continuing from checkpoints/last.ckpt",
        "start": "training",
    }[run.state]
    print(f"seed {run.seed} ({index}/{total}): {what} in {run.folder}", flush=True)


def run_in_turn(runs: Sequence[SeedRun], train_one: Callable[[TrainConfig, bool], int]) -> int:
    """Train the seeds one after another in this process; stop at the first that does not succeed."""
    for index, run in enumerate(runs, 1):
        announce(run, index, len(runs))
        if run.state != "finished":
            code = train_one(run.cfg, run.state == "resume")
            if code:
                return code
    return 0


# ------------------------------------------------------------------------------------ in parallel
class _Child:
    """A seed's ``python -m ner_app train`` process, its lines copied to ours with the seed in front."""

    def __init__(self, run: SeedRun, command: list[str], env: dict[str, str], lock: threading.Lock) -> None:
        self.run, self.prefix, self.lock = run, f"seed{run.seed}| ", lock
        self.ended = False  # set once it ended and every line it wrote was shown
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.process.stdout is not None and self.process.stderr is not None
        self.readers = [
            threading.Thread(target=self._copy, args=(self.process.stdout, sys.stdout), daemon=True),
            threading.Thread(target=self._copy, args=(self.process.stderr, sys.stderr), daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _copy(self, source: IO[bytes], target: IO[str]) -> None:
        for raw in iter(source.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            with self.lock:
                target.write(f"{self.prefix}{line}\n")
                target.flush()

    def finished(self) -> int | None:
        code = self.process.poll()
        if code is not None:
            for reader in self.readers:  # every line it wrote is shown before its end is
                reader.join()
            self.ended = True
        return code


class _CacheGate:
    """Open once the first seed's ELMo layer cache fill has finished: a manifest under the cache folder has a
    generation it did not have before that seed started (every fill publishes one, ``LayerStore.publish``), or
    the seed ended. Always open without a cache to fill."""

    def __init__(self, cache_dir: str | None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.before = _published(self.cache_dir) if self.cache_dir else {}
        self.first: _Child | None = None
        self._open = self.cache_dir is None

    def is_open(self) -> bool:
        if not self._open and self.first is not None:
            assert self.cache_dir is not None
            published = _published(self.cache_dir)
            self._open = self.first.ended or any(self.before.get(k) != g for k, g in published.items())
        return self._open or self.first is None


def _published(cache_dir: Path) -> dict[str, int]:
    """The cache's published generations (``LayerStore.publish``); its module imports torch, so not before the
    early checks of ``train``."""
    from ner_app.train.layer_store import published_generations

    return published_generations(cache_dir)


def child_command(config: str, overrides: Sequence[str], run: SeedRun) -> list[str]:
    """The ``train`` command of one seed: the sweep's config and overrides, then its seed and folder (JSON
    quoting: a path is read back as one YAML string whatever it holds)."""
    tail = [f"seed={run.seed}", f"output_dir={json.dumps(str(run.folder))}", "trainer.threads=1"]
    return [
        sys.executable,
        "-m",
        "ner_app",
        "train",
        "--config",
        config,
        *overrides,
        *tail,
        *(["--resume"] if run.state == "resume" else []),
    ]


def run_in_parallel(runs: Sequence[SeedRun], config: str, overrides: Sequence[str], parallel: int) -> int:
    """Train up to ``parallel`` seeds at a time as child processes of one thread each; after a failure no
    new one starts (the running ones finish). A fresh ELMo layer cache is filled by the first seed alone
    before the others start, so that it is computed once."""
    package_root = str(Path(__file__).resolve().parents[2])  # the children import this same ner_app
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p),
    }
    cfg = runs[0].cfg
    gate = _CacheGate(cfg.elmo.cache_dir if cfg.elmo.enabled else None)
    todo = [r for r in runs if r.state != "finished"]
    for index, run in enumerate(runs, 1):
        announce(run, index, len(runs))
    lock, running, failed = threading.Lock(), list[_Child](), list[tuple[int, int]]()
    try:
        while todo or running:
            while todo and len(running) < parallel and gate.is_open() and not failed:
                run = todo.pop(0)
                child = _Child(run, child_command(config, overrides, run), env, lock)
                running.append(child)
                gate.first = gate.first or child
            if failed and not running:
                break
            time.sleep(0.1)
            for child in list(running):
                code = child.finished()
                if code is not None:
                    running.remove(child)
                    if code:  # killed by a signal: the shell's code for it (128 + N)
                        failed.append((child.run.seed, code if code > 0 else 128 - code))
    except BaseException as stop:  # SIGTERM (Stopped) or Ctrl-C: each child stops at its own pace, resumable
        signum = signal.SIGINT if isinstance(stop, KeyboardInterrupt) else signal.SIGTERM
        for child in running:
            child.process.send_signal(signum)
        for child in running:
            child.process.wait()
            child.finished()
        raise
    for seed, code in failed:
        print(
            f"seed {seed} failed (exit code {code}): its lines above start with 'seed{seed}| '",
            file=sys.stderr,
        )
    return failed[0][1] if failed else 0


def train_seeds(
    cfg: TrainConfig,
    seeds: Sequence[int],
    config: str,
    overrides: Sequence[str],
    parallel: int | None,
    train_one: Callable[[TrainConfig, bool], int],
) -> int:
    """The sweep: each seed trained (``train_one`` in turn, or ``parallel`` child processes of
    ``python -m ner_app train --config config overrides...``), then the compare table of every seed's folder
    (what ``python -m ner_app compare`` prints for them)."""
    check_sweep(cfg, parallel)
    runs = plan(cfg, seeds)
    if parallel is None:
        code = run_in_turn(runs, train_one)
    else:
        code = run_in_parallel(runs, config, overrides, parallel)
    if code:
        return code
    from ner_app.report.compare_tables import compare_table  # the report's imports only once it is drawn

    table = compare_table([r.folder for r in runs])
    print(f"\n{len(runs)} seeds in {cfg.output_dir}:\n{table}", end="", flush=True)
    return 0
