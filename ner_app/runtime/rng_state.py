"""Every random stream a run draws from, as plain data for a checkpoint, and its restoration on resume.

Lightning does not restore RNG state on resume; a resumed run equals an uninterrupted one only if every stream
(torch's CPU and CUDA generators, numpy's, python's, and any private ``torch.Generator``) continues where the
checkpoint left it. The states are tensors, lists and numbers only, so a checkpoint holding them loads with
``torch.load(weights_only=True)`` (docs/reliability.md).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture_rng_states(generators: dict[str, torch.Generator] | None = None) -> dict[str, Any]:
    """The global streams and the named private generators, at this moment."""
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": [name, np.asarray(keys).tolist(), pos, has_gauss, cached],
        "python": list(random.getstate()),
        "generators": {key: g.get_state() for key, g in (generators or {}).items()},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any], generators: dict[str, torch.Generator] | None = None) -> None:
    """Set every stream captured by ``capture_rng_states`` back; a generator missing from ``states`` is kept."""
    torch.set_rng_state(states["torch"])
    name, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    saved = states.get("generators", {})
    for key, generator in (generators or {}).items():
        if key in saved:
            generator.set_state(saved[key])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
