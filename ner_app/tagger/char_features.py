"""The tagger's own character feature for each word (Ma & Hovy 2016): char CNN, max-pooled over the word."""

from __future__ import annotations

import torch
from torch import nn

# Finding the distinct rows pays from about 50-60 positions at 128 filters (the baseline's, 1 thread, forward
# and backward: benchmarks/char_rows.py): below that, every position is computed.
DISTINCT_MIN_WORK = 8192  # positions x filters


class WordCharCNN(nn.Module):
    """Character embeddings -> one convolution (same padding) -> ReLU -> max over the word's characters.

    Every word is computed on its own, so on a CPU each distinct character row of a batch is computed once
    and copied to its positions: sentences repeat words ("the", ",", "."), and every padded position is the
    same all-zero row. A row's features are those it gets among all the positions, bit for bit (tested); in
    training the gradients of a word's positions are summed before the convolution's, the same sum in another
    order. The ONNX export traces the same (an ONNX ``Unique``). On a GPU, where finding the distinct rows
    waits for the device, and in batches too small to pay for the search (``DISTINCT_MIN_WORK``), every
    position is computed. Without autograd (evaluation, ``predict``) the rows go through in chunks of
    ``chunk_words`` (None: all at once): the (words, filters, W) activations then stay bounded however long a
    sentence is. Training computes all at once: its gradients are those of one pass.
    """

    chunk_words: int | None = 4096

    def __init__(self, num_chars: int, char_dim: int = 16, filters: int = 128, width: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, width, padding=width // 2)
        self.output_dim = filters

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """chars (B, T, W) long, 0 = padding -> features (B, T, filters)."""
        batch, steps, width = chars.shape
        flat = chars.reshape(batch * steps, width)  # (N, W)
        small = flat.shape[0] * self.output_dim < DISTINCT_MIN_WORK
        # a traced graph (the ONNX export) searches whatever the size of the example it was traced with
        if flat.device.type != "cpu" or (small and not torch.jit.is_tracing()):
            return self.chunked(flat).reshape(batch, steps, -1)
        distinct, rows = torch.unique(flat, dim=0, return_inverse=True)  # (U, W), (N,)
        # In float32 (under bf16 autocast the features are bf16, and the model's concatenation makes them float32
        # anyway), so that the gather's backward sums a word's gradients in float32, not in bf16.
        return self.chunked(distinct).float()[rows].reshape(batch, steps, -1)

    def chunked(self, flat: torch.Tensor) -> torch.Tensor:
        """chars (N, W) long -> features (N, filters): ``words``, in chunks of ``chunk_words`` without autograd."""
        chunk = self.chunk_words
        if chunk is None or torch.is_grad_enabled() or flat.shape[0] <= chunk:
            return self.words(flat)
        first = self.words(flat[:chunk])  # (chunk, filters)
        out = first.new_empty(flat.shape[0], first.shape[1])  # (N, filters)
        out[:chunk] = first
        for start in range(chunk, flat.shape[0], chunk):
            out[start : start + chunk] = self.words(flat[start : start + chunk])
        return out

    def words(self, flat: torch.Tensor) -> torch.Tensor:
        """chars (N, W) long -> features (N, filters)."""
        x = self.embed(flat).transpose(1, 2)  # (N, d, W)
        h = torch.relu(self.conv(x))  # (N, filters, W)
        # Padding characters must not win the max: after ReLU every real value is >= 0, so 0 is neutral.
        h = h.masked_fill((flat == 0)[:, None, :], 0.0)
        return h.amax(dim=-1)
