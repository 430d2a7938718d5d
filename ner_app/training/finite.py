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
    """After every training step: the loss and every trainable weight must be finite, else stop with the step."""

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        step = trainer.global_step
        if loss is not None and not math.isfinite(float(loss)):
            raise NonFiniteError(
                f"training stopped at step {step} (epoch {trainer.current_epoch}): the loss is {float(loss)}; "
                "check optim.lr / train.lr, the gradient clip and the input vectors (a NaN biLM or GloVe file)"
            )
        weights = {n: p.detach() for n, p in pl_module.named_parameters() if p.requires_grad}
        bad = non_finite_tensors(weights)
        if bad:
            raise NonFiniteError(
                f"training stopped at step {step} (epoch {trainer.current_epoch}): weights became non-finite "
                f"({', '.join(bad[:3])}); check optim.lr / train.lr and the gradient clip"
            )
