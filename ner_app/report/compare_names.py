"""The names of ``compare``'s groups, read from the run folders and checked against the seeds they recorded.

A folder name only loses a part when the run's own record confirms that part is its seed: ``elmo_seed3``
and ``elmo_s3`` name the group ``elmo`` only when ``config.yaml`` says ``seed: 3``, ``b1`` names it ``b``
only for seed 1, and a folder named by its seed alone (``results/<arm>/seed3``, ``.../3``) gives its
parent's name. Every other folder keeps its whole name. When two groups would get one name that way (``b1``
and ``b2`` holding two different configs), those groups keep their whole folder names; when that still
does not tell every group apart, the caller names the groups by what differs in their configs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

# A trailing seed: an optional "seed" or "s" word, then the digits, set off from the rest by "-", "_", "."
# or a space, or not at all ("b1"). Only the digits' value is compared with the recorded seed.
_SEED_SUFFIX = re.compile(r"(?P<stem>.*?)[-_. ]*(?:(?<![A-Za-z])seed|(?<![A-Za-z])s)?[-_. ]*(?P<seed>\d+)")


def seed_in_name(name: str, seed: int) -> str | None:
    """``name`` without its trailing seed when the digits there are ``seed``: "" for a name that is the seed
    alone ("seed3", "3"), None when the name does not end in this seed."""
    match = _SEED_SUFFIX.fullmatch(name)
    if match is None or int(match["seed"]) != seed:
        return None
    return match["stem"].strip("-_. ")


def run_label(path: Path, seed: int) -> str:
    """The group a run's folder names: the folder name without its recorded seed, the parent's name for a
    folder named by its seed alone, else the whole folder name."""
    path = path.resolve()
    stem = seed_in_name(path.name, seed)
    if stem is None:
        return path.name
    if stem or not path.parent.name:
        return stem or path.name
    return path.parent.name


def _shared(values: Sequence[str]) -> str | None:
    return values[0] if values and all(v == values[0] for v in values) else None


def _whole_name(runs: Sequence[tuple[Path, int]]) -> str | None:
    """The folder name the runs share, unless it is a seed alone: "seed2" says nothing of a config."""
    name = _shared([path.resolve().name for path, _ in runs])
    return None if name is None or any(seed_in_name(name, seed) == "" for _, seed in runs) else name


def folder_names(groups: Sequence[Sequence[tuple[Path, int]]]) -> list[str] | None:
    """A distinct name per group from its runs' (folder, recorded seed), or None when folders cannot tell
    the groups apart (the caller then names them by their configs)."""
    names = [_shared([run_label(path, seed) for path, seed in runs]) for runs in groups]
    clash = [name is None or names.count(name) > 1 for name in names]  # runs that disagree, or a shared name
    names = [_whole_name(runs) if bad else name for runs, name, bad in zip(groups, names, clash, strict=True)]
    if any(name is None for name in names) or len(set(names)) < len(names):
        return None
    return [name for name in names if name is not None]
