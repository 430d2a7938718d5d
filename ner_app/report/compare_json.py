"""``compare --json``: what the tables show, as one JSON document for programs (docs/reports.md lists the keys).

The numbers are the ones the tables round: F1 in percent, differences in F1 points, full precision. A
summary is ``{"mean", "std", "n"}`` (``std`` is the sample standard deviation, n - 1, and null for a single
value); a paired difference adds ``"ci95": [low, high]`` (Student's t; null for a single seed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ner_app.report.compare import EVALUATED, Group, Summary, config_value, differing_keys, paired_differences
from ner_app.report.compare_tables import MAX_ALL_PAIRS, pairs

SCHEMA = 1  # raised when a key changes meaning or goes away; new keys may come without it


def _summary(values: Sequence[float]) -> dict[str, Any]:
    s = Summary.of(values)
    return {"mean": s.mean, "std": s.std, "n": s.n}


def _difference(values: Sequence[float]) -> dict[str, Any]:
    bounds = Summary.of(values).bounds(0.95)
    return {**_summary(values), "ci95": None if bounds is None else list(bounds)}


def _mixes(group: Group, transformer: bool = False) -> list[dict[str, Any]]:
    """Each ELMo mix of the group (input, output; ``transformer``: the transformer's mix) over the runs that
    recorded it, as the mix table shows it."""
    out = []
    runs = [r.transformer_mixes if transformer else r.mixes for r in group.runs]
    for k in range(max((len(r) for r in runs), default=0)):
        mixes = [r[k] for r in runs if len(r) > k]
        layers = len(mixes[0].softmax_w)
        out.append(
            {
                "place": mixes[0].place(k),
                "runs": len(mixes),
                "softmax_w": [
                    _summary([m.softmax_w[j] for m in mixes if j < len(m.softmax_w)]) for j in range(layers)
                ],
                "gamma": _summary([m.gamma for m in mixes]),
            }
        )
    return out


def _group(group: Group, keys: Sequence[str]) -> dict[str, Any]:
    runs = group.runs
    types = {s: sorted({t for r in runs for t in r.per_type[s]}) for s in EVALUATED}
    return {
        "name": group.name,
        "seeds": group.seeds,
        "config": {k: config_value(runs[0], k) for k in keys},
        "f1": {s: _summary([r.f1[s] for r in runs]) for s in EVALUATED},
        "per_type": {
            s: {t: _summary([r.per_type[s][t] for r in runs if t in r.per_type[s]]) for t in types[s]}
            for s in EVALUATED
        },
        "elmo_mix": _mixes(group),
        "transformer_mix": _mixes(group, transformer=True),
        "runs": [
            {
                "path": str(r.path),
                "seed": r.seed,
                "f1": dict(r.f1),
                "per_type": {s: dict(r.per_type[s]) for s in EVALUATED},
            }
            for r in runs
        ],
    }


def _pair(a: Group, b: Group) -> dict[str, Any] | None:
    seeds, _ = paired_differences(a, b, "dev")
    if not seeds:
        return None
    diffs = {s: paired_differences(a, b, s)[1] for s in EVALUATED}
    return {
        "a": a.name,
        "b": b.name,
        "seeds": seeds,
        "difference": {s: _difference(diffs[s]) for s in EVALUATED},
        "per_seed": [{"seed": seed, **{s: diffs[s][i] for s in EVALUATED}} for i, seed in enumerate(seeds)],
    }


def compare_json(groups: Sequence[Group]) -> dict[str, Any]:
    """The comparison as plain JSON values: groups in the tables' order, then the pairs that share seeds."""
    keys = differing_keys([g.runs for g in groups])
    found = (_pair(a, b) for a, b in pairs(groups))
    return {
        "schema": SCHEMA,
        "splits": list(EVALUATED),
        "differing_keys": keys,
        "groups": [_group(g, keys) for g in groups],
        "pairing": "all" if len(groups) <= MAX_ALL_PAIRS else "each with the first",
        "pairs": [p for p in found if p is not None],
    }
