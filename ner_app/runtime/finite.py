"""Stop at the first non-finite loss or weight: a NaN run must not train on, export and predict nothing."""

from __future__ import annotations

import math
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback

from ner_app.errors import NerAppError


class NonFiniteError(NerAppError):
    """Training produced a NaN or infinite loss or weight."""


def non_finite_tensors(tensors: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors holding a NaN or an infinity."""
    return [k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]


class FiniteGuard(Callback):
    """The loss of every step and the weights of every checkpoint must be finite, else stop naming the step.

    A non-finite weight makes the next loss non-finite, so the per-step check of one number suffices during
    training; the full weight check runs before each checkpoint, which is never written with NaN weights.
    """

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not math.isfinite(float(loss)):
            raise NonFiniteError(
                f"training stopped at step {trainer.global_step} (epoch {trainer.current_epoch}): the loss is "
                f"{float(loss)}; check optim.lr / train.lr, the gradient clip and the input vectors"
            )

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        weights = {n: p.detach() for n, p in pl_module.named_parameters() if p.requires_grad}
        bad = non_finite_tensors(weights)
        if bad:
            raise NonFiniteError(
                f"training stopped at step {trainer.global_step} (epoch {trainer.current_epoch}): weights became "
                f"non-finite ({', '.join(bad[:3])}); check optim.lr / train.lr and the gradient clip"
            )
