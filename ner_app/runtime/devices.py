"""Where and in what precision to train: bf16-mixed on a GPU, 32-bit on CPU, unless configured."""

from __future__ import annotations

import torch


def choose_precision(accelerator: str, precision: str) -> tuple[str, str]:
    """Resolve ``"auto"`` in (accelerator, precision) for this machine."""
    if accelerator == "auto":
        accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    if precision == "auto":
        precision = "bf16-mixed" if accelerator == "gpu" else "32-true"
    return accelerator, precision
