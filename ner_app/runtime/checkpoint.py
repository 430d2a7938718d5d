"""Loading checkpoints without running anyone's code: ``torch.load(weights_only=True)`` always, explicitly (so
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn it off), and every failure as one line naming the file.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from ner_app.errors import NerAppError
from ner_app.files import atomic_path


class CheckpointError(NerAppError):
    """A checkpoint that is refused: unreadable, truncated, or holding more than tensors and plain data."""


def load_checkpoint(path: str | Path, map_location: Any = "cpu", mmap: bool = False) -> dict[str, Any]:
    """The checkpoint at ``path`` as plain data; anything that would need unpickling code is refused.
    ``mmap``: tensors are mapped, not read (for a look at the checkpoint's metadata)."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path}: is a folder, expected a checkpoint file")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except (FileNotFoundError, PermissionError):
        raise
    except pickle.UnpicklingError as err:  # weights_only refused a global: a payload or a foreign object
        first = str(err).strip().splitlines()[-1][:200] if str(err).strip() else ""
        raise CheckpointError(
            f"{path}: refused, it holds objects other than tensors and plain data ({first}); "
            "checkpoints are never unpickled"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, KeyError) as err:
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated or corrupt: {type(err).__name__})"
        ) from None
    if not isinstance(checkpoint, dict):
        raise CheckpointError(
            f"{path}: not a checkpoint (found {type(checkpoint).__name__}, expected a dict)"
        )
    return checkpoint


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint I/O, loading with ``load_checkpoint`` above (``trainer.fit(ckpt_path=...)``) and
    saving through the one atomic write: a full disk or a kill never leaves a truncated checkpoint under its
    final name, and an error names the run folder's own file."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        buffer = io.BytesIO()  # serialised in memory, written with plain file I/O: a full disk is then an
        torch.save(checkpoint, buffer)  # OSError from write(), where torch.save to a file raises RuntimeError
        with atomic_path(path) as tmp:
            tmp.write_bytes(buffer.getbuffer())

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict:
        return load_checkpoint(path, map_location=map_location if map_location is not None else "cpu")
