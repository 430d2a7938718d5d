"""``python -m ner_app compare RUN_DIR ...``: F1 over seeds per config, and paired differences by seed.

A run folder is read from what ``train.py`` leaves in it: ``metrics.json`` (the scores), ``config.yaml`` (the
config, seed included) and the run identity stamped in its checkpoint (the data's fingerprint). Runs are
grouped by their config without the seed, the output folder and the keys that only say how a run was
carried out (threads, logging, caches), and by their data: a group is one recipe, its runs are its seeds.
A run whose metrics.json names its biLM by fingerprint is grouped by those weights, not by their file paths.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ner_app.config.load import PATH_KEYS, config_to_dict, load_config, project_root
from ner_app.config.schema import OPERATIONAL, TrainConfig, keys_with
from ner_app.errors import NerAppError
from ner_app.report.compare_names import folder_names
from ner_app.report.student_t import t_quantile
from ner_app.runtime.run_dir import IDENTITY_KEY, flatten_tree
from ner_app.train.corpus import EVALUATED
from ner_app.train.metrics import Mix, RunMetrics

# Keys that change neither what is trained nor the result (OPERATIONAL metadata): left out of a run's recipe.
OPERATIONAL_KEYS = set(keys_with(OPERATIONAL, TrainConfig))
BILM_KEY = "elmo.bilm"  # the biLM's weights fingerprint, in place of its file paths (metrics.json)
BILM_PATHS = ("elmo.options", "elmo.weights")
ENCODER_KEY = (
    "transformer.encoder"  # the transformer's files' fingerprint, in place of its folder or hub name
)
ENCODER_PATHS = ("transformer.folder", "transformer.hub")


class CompareError(NerAppError):
    """A folder given to ``compare`` that is not a finished training run, or two runs of one seed."""


@dataclass(frozen=True)
class Run:
    """One finished training run: its recipe, seed and scores (F1 in percent)."""

    path: Path
    seed: int
    recipe: tuple[tuple[str, Any], ...]  # the flattened config without OPERATIONAL_KEYS, sorted by key
    data: str | None  # the data fingerprint of the checkpoint's run identity (None without a checkpoint)
    f1: dict[str, float]  # split -> entity F1
    per_type: dict[str, dict[str, float]]  # split -> entity type -> F1
    mixes: tuple[Mix, ...] = ()  # metrics.json "elmo_mix": the chosen checkpoint's ELMo mixes (none without)
    # The biLM's paths when elmo.bilm is known (the transformer's when transformer.encoder is): shown in the
    # tables, not grouped on.
    shown: tuple[tuple[str, Any], ...] = ()
    transformer_mixes: tuple[Mix, ...] = ()  # metrics.json "transformer_mix" (none without a transformer)


@dataclass(frozen=True)
class Group:
    """Runs of one recipe on one data set, in seed order, with a readable name."""

    name: str
    runs: tuple[Run, ...]

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]


@dataclass(frozen=True)
class Summary:
    """Mean and sample standard deviation (n - 1; None for a single value) of ``n`` values."""

    mean: float
    std: float | None
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        n = len(values)
        mean = math.fsum(values) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
        return cls(mean, std, n)

    def __str__(self) -> str:
        return f"{self.mean:.2f}" if self.std is None else f"{self.mean:.2f} ± {self.std:.2f}"

    def signed(self) -> str:
        """As ``str``, with the sign of the mean always shown (for differences)."""
        return f"{self.mean:+.2f}" if self.std is None else f"{self.mean:+.2f} ± {self.std:.2f}"

    def bounds(self, level: float = 0.95) -> tuple[float, float] | None:
        """The two-sided ``level`` confidence interval of the mean (Student's t, n - 1 degrees of freedom);
        None for a single value."""
        if self.std is None:
            return None
        half = t_quantile((1 + level) / 2, self.n - 1) * self.std / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    def interval(self, level: float = 0.95) -> str:
        """``bounds`` as text ("–" for a single value)."""
        bounds = self.bounds(level)
        return "–" if bounds is None else f"[{bounds[0]:+.2f}, {bounds[1]:+.2f}]"


def _data_fingerprint(run_dir: Path) -> str | None:
    """The data fingerprint stamped in the run's checkpoint (memory-mapped: the weights are not read)."""
    from ner_app.runtime.checkpoint import load_checkpoint  # torch: only where a checkpoint is there

    for name in ("last.ckpt", "best.ckpt"):
        path = run_dir / "checkpoints" / name
        if path.is_file():
            try:
                checkpoint = load_checkpoint(path, mmap=True)
            except NerAppError as err:
                raise CompareError(f"{err}; it is read for the run's data fingerprint") from None
            identity = checkpoint.get(IDENTITY_KEY) if isinstance(checkpoint, dict) else None
            data = identity.get("data") if isinstance(identity, dict) else None
            return data if isinstance(data, str) else None
    return None


def read_run(run_dir: str | Path) -> Run:
    """The run in ``run_dir``; a ``CompareError`` naming the path when it is not a finished training run."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise CompareError(f"{run_dir}: no such folder, expected a run folder (a train.py output_dir)")
    if not run_dir.is_dir():
        raise CompareError(f"{run_dir}: is a file, expected a run folder (a train.py output_dir)")
    metrics, config = run_dir / "metrics.json", run_dir / "config.yaml"
    if not metrics.is_file():
        if config.is_file():
            raise CompareError(
                f"{run_dir}: no metrics.json, the run has not finished (continue it with --resume)"
            )
        raise CompareError(f"{run_dir}: not a run folder (no metrics.json or config.yaml)")
    scores = RunMetrics.read(metrics)
    if not config.is_file():
        raise CompareError(f"{run_dir}: no config.yaml, needed to group the run with its config")
    flat: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in flatten_tree(config_to_dict(load_config(config))).items()
    }
    shown: tuple[tuple[str, Any], ...] = ()
    if scores.bilm_fingerprint is not None:  # the weights name the biLM: a moved file stays one recipe
        shown = tuple((k, flat.pop(k)) for k in BILM_PATHS if k in flat)
        flat[BILM_KEY] = scores.bilm_fingerprint
    if scores.transformer_fingerprint is not None:  # the same for a transformer's files
        shown += tuple((k, flat.pop(k)) for k in ENCODER_PATHS if k in flat)
        flat[ENCODER_KEY] = scores.transformer_fingerprint
    recipe = tuple(sorted((k, v) for k, v in flat.items() if k not in OPERATIONAL_KEYS))
    f1 = {s: scores.split(s).f1 for s in EVALUATED}
    per_type = {s: {t: v.f1 for t, v in scores.split(s).per_type.items()} for s in EVALUATED}
    data = _data_fingerprint(run_dir)
    return Run(
        run_dir,
        int(flat["seed"]),
        recipe,
        data,
        f1,
        per_type,
        scores.elmo_mix or (),
        shown,
        scores.transformer_mix or (),
    )


def read_runs(run_dirs: Iterable[str | Path]) -> list[Run]:
    """``read_run`` of each folder, in order; a folder named twice (overlapping globs, a symlink) counts once."""
    runs, seen = [], set()
    for folder in run_dirs:
        real = os.path.realpath(folder)  # (Path.resolve raises on a symlink loop; read_run names it)
        if real not in seen:
            seen.add(real)
            runs.append(read_run(folder))
    return runs


def group_runs(runs: Iterable[Run]) -> list[Group]:
    """Runs grouped by recipe and data, in the order groups first appear; names from folders or differences.

    A run without a checkpoint (no data fingerprint) joins the group of its recipe when that recipe was run
    on one data set only. Two runs of one group with one seed are an error: they would count twice.
    """
    keyed: dict[tuple[Any, ...], list[Run]] = {}
    runs = list(runs)
    for run in runs:
        keyed.setdefault((run.recipe, run.data), []).append(run)
    for recipe, data in list(keyed):
        known = [d for r, d in keyed if r == recipe and d is not None]
        if data is None and len(known) == 1:
            keyed[(recipe, known[0])] += keyed.pop((recipe, None))
    groups = []
    for members in keyed.values():
        members.sort(key=lambda r: r.seed)
        for a, b in zip(members, members[1:], strict=False):
            if a.seed == b.seed:
                raise CompareError(
                    f"{a.path} and {b.path}: two runs of one config with seed {a.seed}; pass only one"
                )
        groups.append(members)
    return [Group(name, tuple(m)) for name, m in zip(_names(groups), groups, strict=True)]


def differing_keys(groups: Sequence[Sequence[Run]]) -> list[str]:
    """The recipe keys (and "data") whose value is not the same in every group."""
    recipes = [dict(g[0].recipe) for g in groups]
    keys = sorted({k for r in recipes for k in r})
    out = [k for k in keys if len({repr(r.get(k)) for r in recipes}) > 1]
    return out + (["data"] if len({g[0].data for g in groups}) > 1 else [])


def config_value(run: Run, key: str) -> Any:
    """A recipe value as a JSON value ("data": the data fingerprint). Paths read as configs write them,
    relative to the run's project root (or beside it, "../shared/..."), so that tables and JSON do not show
    this machine's layout; a path far outside the project stays absolute."""
    if key == "data":
        return run.data
    value = dict(run.recipe).get(key, dict(run.shown).get(key))
    if isinstance(value, tuple):
        return list(value)
    if key in PATH_KEYS and isinstance(value, str) and value != "package":
        text = os.path.relpath(value, project_root(run.path / "config.yaml"))
        return value if text.startswith(os.pardir + os.sep + os.pardir) else text
    return value


def value_of(run: Run, key: str) -> str:
    """``config_value`` as the config file writes it, for a table cell ("data": the fingerprint's first 8 hex
    digits, the biLM's and the transformer's their first 12; a value longer than 32 characters keeps its end)."""
    value = config_value(run, key)
    if key == "data":
        return (value or "?")[:8]
    if key in (BILM_KEY, ENCODER_KEY) and value is not None:
        return str(value)[:12]
    if value is None or isinstance(value, bool):
        text = {None: "null", True: "true", False: "false"}[value]
    elif isinstance(value, list):
        text = "[" + ", ".join(map(str, value)) + "]"
    else:
        text = str(value)
    return text if len(text) <= 32 else "…" + text[-31:]  # a long path: its end tells runs apart


def _names(groups: Sequence[Sequence[Run]]) -> list[str]:
    """Folder names checked against the recorded seeds (``compare_names``) when they tell the groups apart,
    else the config keys that differ."""
    named = folder_names([[(r.path, r.seed) for r in members] for members in groups])
    if named is not None:
        return named
    keys = differing_keys(groups)
    if not keys:  # one group whose runs' folders share no name
        return [f"config {i + 1}" for i in range(len(groups))]
    names = [
        ", ".join(f"{k}={value_of(members[0], k)}" for k in keys[:3])
        + (f" (+{len(keys) - 3} more)" if len(keys) > 3 else "")
        for members in groups
    ]
    return [n if names.count(n) == 1 else f"{n} #{i + 1}" for i, n in enumerate(names)]


def paired_differences(a: Group, b: Group, split: str) -> tuple[list[int], list[float]]:
    """The seeds both groups ran and, per seed, F1 of ``b`` minus F1 of ``a`` on ``split``."""
    by_seed = {r.seed: r for r in a.runs}
    shared = [r for r in b.runs if r.seed in by_seed]
    return [r.seed for r in shared], [r.f1[split] - by_seed[r.seed].f1[split] for r in shared]
