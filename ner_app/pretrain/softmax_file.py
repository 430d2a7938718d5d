"""``softmax.hdf5``, the LM head of a pretrained biLM: the one module that writes and reads it.

Layout (the reference's): group ``softmax`` with ``W`` (V, P) and ``b`` (V,), float32, rows in the order of
``vocab.txt``. Written whole in memory, then in place by one atomic rename (``files.write_bytes``), as
``weights.hdf5`` is; read with every dataset's presence, shape and finiteness checked first.
"""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import numpy as np
import torch

from ner_app.bilm.weights import WeightFileError
from ner_app.files import write_bytes
from ner_app.pretrain.softmax import SampledSoftmaxLoss

SOFTMAX_FILE = "softmax.hdf5"


def save_softmax(softmax: SampledSoftmaxLoss, path: str | Path) -> Path:
    """Write ``softmax``'s W and b as ``path``; returns the path."""
    buffer = io.BytesIO()  # a full disk is then an OSError of one write(), never one inside HDF5
    with h5py.File(buffer, "w") as f:
        group = f.create_group("softmax")
        group.create_dataset("W", data=softmax.W.detach().float().cpu().numpy())
        group.create_dataset("b", data=softmax.b.detach().float().cpu().numpy())
    return write_bytes(path, buffer.getbuffer())


def load_softmax(softmax: SampledSoftmaxLoss, path: str | Path) -> None:
    """Fill ``softmax`` from ``path``; a missing, misshapen or non-finite dataset is one WeightFileError naming
    the file, the dataset and what was expected (the shapes follow from vocab.txt and options.json)."""
    path = Path(path)
    expected = {"softmax/W": (softmax.num_classes, softmax.dim), "softmax/b": (softmax.num_classes,)}
    try:
        f = h5py.File(path, "r")
    except OSError as err:
        raise WeightFileError(f"{path}: not an HDF5 file (expected softmax/W and softmax/b): {err}") from None
    with f:
        arrays = {}
        for name, shape in expected.items():
            if name not in f or not isinstance(f[name], h5py.Dataset):
                raise WeightFileError(f"{path}: missing dataset '{name}' (expected shape {shape})")
            if tuple(f[name].shape) != shape:
                raise WeightFileError(
                    f"{path}: dataset '{name}' has shape {tuple(f[name].shape)}, expected {shape} "
                    "from vocab.txt and options.json"
                )
            arrays[name] = np.asarray(f[name][...], dtype=np.float32)
            if not np.isfinite(arrays[name]).all():
                raise WeightFileError(f"{path}: dataset '{name}' holds NaN or infinite values")
    with torch.no_grad():
        softmax.W.copy_(torch.from_numpy(arrays["softmax/W"]))
        softmax.b.copy_(torch.from_numpy(arrays["softmax/b"]))


__all__ = ["SOFTMAX_FILE", "load_softmax", "save_softmax"]
