"""ScalarMix: the task-specific weighting of biLM layers (Peters et al. 2018, Eq. 1)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class ScalarMix(nn.Module):
    """ELMo_k = gamma * sum_j softmax(w)_j * h_{k,j}, optionally layer-normalising each h_j first.

    ``w`` starts at 0 (uniform weights) and ``gamma`` at 1. ``l2_penalty`` gives ||w||^2 on the pre-softmax
    weights, which the paper adds to the task loss times lambda (gamma is not penalised).
    """

    def __init__(
        self,
        mixture_size: int,
        do_layer_norm: bool = False,
        initial_scalar_parameters: Sequence[float] | None = None,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        initial = (
            list(initial_scalar_parameters) if initial_scalar_parameters is not None else [0.0] * mixture_size
        )
        if len(initial) != mixture_size:
            raise ValueError(
                f"{len(initial)} initial scalar parameters given for a mixture of {mixture_size} layers"
            )
        self.mixture_size, self.do_layer_norm = mixture_size, do_layer_norm
        self.scalar_parameters = nn.Parameter(
            torch.tensor(initial, dtype=torch.float), requires_grad=trainable
        )
        self.gamma = nn.Parameter(torch.ones(1), requires_grad=trainable)

    def forward(self, layers: Sequence[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        """layers: N tensors (B, T, D); mask (B, T) bool, needed for layer norm. Returns (B, T, D)."""
        if len(layers) != self.mixture_size:
            raise ValueError(f"ScalarMix of {self.mixture_size} layers got {len(layers)} tensors")
        weights = torch.softmax(self.scalar_parameters, dim=0)  # (N,)
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("ScalarMix with do_layer_norm=True needs the mask")
            layers = [self._layer_norm(layer, mask) for layer in layers]
        mixed = sum(w * layer for w, layer in zip(weights.unbind(0), layers, strict=True))
        return self.gamma * mixed

    @staticmethod
    def _layer_norm(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """One mean and variance over all unmasked elements (B x T x D), applied at every position."""
        m = mask[:, :, None].to(x.dtype)  # (B, T, 1)
        count = m.sum() * x.shape[-1]
        mean = (x * m).sum() / count
        variance = (((x - mean) * m) ** 2).sum() / count
        return (x - mean) / torch.sqrt(variance + 1e-13)

    def learned(self) -> dict[str, list[float] | float]:
        """What the mix learned, as plain numbers: softmax(w) per layer (summing to 1) and gamma."""
        weights, gamma = mix_values(self.scalar_parameters, self.gamma)
        return {"softmax_w": weights, "gamma": gamma}

    def l2_penalty(self) -> torch.Tensor:
        """||w||^2 over the pre-softmax layer weights."""
        return (self.scalar_parameters**2).sum()


def mix_values(scalar_parameters: torch.Tensor, gamma: torch.Tensor) -> tuple[list[float], float]:
    """softmax(w) per layer and gamma as plain numbers, from a mix's parameters (or a state dict's tensors)."""
    weights = torch.softmax(scalar_parameters.detach().float(), dim=0)
    return [float(w) for w in weights], float(gamma.detach().float().reshape(-1)[0])
