"""A ``ModelCheckpoint`` that keeps its best score when the run folder was copied or moved.

``output_dir`` is a key ``--resume`` may change, so a run folder can be copied (to continue a run under a new
name) or moved (to another disk or machine) and resumed there. Lightning's ``ModelCheckpoint`` keeps the best
score only when the checkpoint's ``dirpath`` equals the new one; otherwise it reloads the old
``best_model_path`` without its score, so the first validation after the resume counts as "best" and
overwrites ``best.ckpt`` even when it is worse, while early stopping (which does keep its score) goes on
counting from the true best. Our checkpoints live inside the run folder, so a path under the old folder names
the same file under the new one.
"""

from __future__ import annotations

import os
from typing import Any

from ner_app.runtime.lightning_compat import CheckpointUnderItsBaseKey


class MovableCheckpoint(CheckpointUnderItsBaseKey):
    """``ModelCheckpoint`` whose state follows the run folder to its new path on ``--resume``. Its state keeps
    ``ModelCheckpoint``'s key, so checkpoints written before this class existed resume with their best score,
    and the other way round."""

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        old, new = state_dict.get("dirpath"), self.dirpath
        if old and new and old != new:
            moved = relocate_state(state_dict, str(old), str(new))
            # Only when the best file came along: a folder without it keeps Lightning's behaviour (no score).
            best = moved.get("best_model_path") or ""
            if not best or os.path.isfile(best):
                state_dict = moved
        super().load_state_dict(state_dict)


def relocate_state(state: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """A copy of a checkpoint callback's state with every path under ``old`` moved under ``new``."""

    def move(path: Any) -> Any:
        if isinstance(path, str) and (path == old or path.startswith(old.rstrip(os.sep) + os.sep)):
            return os.path.join(new, os.path.relpath(path, old)) if path != old else new
        return path

    moved = {key: move(value) for key, value in state.items()}
    if isinstance(state.get("best_k_models"), dict):
        moved["best_k_models"] = {move(path): score for path, score in state["best_k_models"].items()}
    return moved


__all__ = ["MovableCheckpoint", "relocate_state"]
