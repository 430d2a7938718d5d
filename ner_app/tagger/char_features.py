"""The tagger's own character feature for each word (Ma & Hovy 2016): char CNN, max-pooled over the word."""

from __future__ import annotations

import torch
from torch import nn


class WordCharCNN(nn.Module):
    """Character embeddings -> one convolution (same padding) -> ReLU -> max over the word's characters."""

    def __init__(self, num_chars: int, char_dim: int = 16, filters: int = 128, width: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, width, padding=width // 2)
        self.output_dim = filters

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """chars (B, T, W) long, 0 = padding -> features (B, T, filters)."""
        batch, steps, width = chars.shape
        flat = chars.reshape(batch * steps, width)  # (N, W)
        x = self.embed(flat).transpose(1, 2)  # (N, d, W)
        h = torch.relu(self.conv(x))  # (N, filters, W)
        # Padding characters must not win the max: after ReLU every real value is >= 0, so 0 is neutral.
        h = h.masked_fill((flat == 0)[:, None, :], 0.0)
        return h.amax(dim=-1).reshape(batch, steps, -1)
