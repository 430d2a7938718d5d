"""Documents as runs of ids: the one helper that turns a per-sentence document id into document ranges."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def id_runs(ids: Sequence[Hashable | None]) -> list[range]:
    """The ranges of consecutive positions with equal ids, in order; a position whose id is None belongs to no
    run and ends the one before it. ``[0, 0, 1, None, 1]`` -> ``[range(0, 2), range(2, 3), range(4, 5)]``."""
    runs: list[range] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] or ids[i] is None:
            if ids[start] is not None:
                runs.append(range(start, i))
            start = i
    return runs


__all__ = ["id_runs"]
