"""The tagger and its biLM as modules that trace into ONNX graphs with dynamic batch and length.

``BilmGraph``: char ids with <S> and </S> (B, S, W) -> the biLM's L+1 layers (L+1, B, S, 2P).
``TaggerGraph``: word ids (B, T), char ids (B, T, W) and, with ELMo, those layers -> CRF emissions (B, T, K).

Both run the trained modules themselves; only two things are written differently, because a trace records
one run of the Python code and so fixes every Python-level loop count and every tensor turned into an int:

- the biLM's LSTM cells (``LstmCellWithProjection``) loop over time steps of packed rows, cutting the batch as
  rows end. Here the same cell runs over padded rows, a finished row keeping its state (what the packed loop
  does), in a TorchScript-compiled function whose loop the exporter turns into an ONNX ``Loop`` over the
  positions. torch's own ``nn.LSTM`` (an ONNX ``LSTM``) cannot replace it: it has neither the projection with
  its clip nor TF's cell clip (ONNX's ``clip`` attribute clips the gate inputs, not the cell state).
- the char CNN's tail trim (``trim_constant_tail``) computes how many char positions to keep as an int; here
  the same count is a tensor, so the graph trims each batch as the module does.

The tagger's BiLSTM (``nn.LSTM`` over packed rows) exports as ONNX ``LSTM`` ops with sequence lengths as is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.char_cnn import CharCNN
from ner_app.bilm.lstm import LstmCellWithProjection, reverse_within_length
from ner_app.tagger.batch import Batch
from ner_app.tagger.model import BiLstmCrfTagger

NO_CLIP = 3.0e38  # a null clip: clamping finite float32 values to +-3e38 changes none of them


def recurrence(
    projected: Tensor, mask: Tensor, recurrent: Tensor, projection: Tensor, cell_clip: float, proj_clip: float
) -> Tensor:
    """One direction of one biLM layer over padded rows, time-major: projected inputs (S, B, 4C) (x W + B with
    the forget bias), mask (S, B, 1) bool, recurrent weight (P, 4C), projection weight (C, P) -> outputs
    (S, B, P), 0 at padded positions. The cell of ``LstmCellWithProjection.forward`` (TF gate order i, j, f, o)."""
    steps, batch = projected.shape[0], projected.shape[1]
    h = torch.zeros(batch, projection.shape[1], dtype=projected.dtype)
    c = torch.zeros(batch, recurrent.shape[1] // 4, dtype=projected.dtype)
    outputs = []
    for t in range(steps):
        z = projected[t] + torch.matmul(h, recurrent)  # (B, 4C)
        i, j, f, o = z.chunk(4, 1)
        cell = (torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)).clamp(-cell_clip, cell_clip)
        out = torch.matmul(torch.sigmoid(o) * torch.tanh(cell), projection).clamp(-proj_clip, proj_clip)
        keep = mask[t]  # (B, 1): rows past their end keep their state and output 0
        h, c = torch.where(keep, out, h), torch.where(keep, cell, c)
        outputs.append(torch.where(keep, out, torch.zeros_like(out)))
    return torch.stack(outputs)


def trim_tail(char_ids: Tensor, width: int) -> Tensor:
    """``trim_constant_tail`` with the kept width as a tensor, so that it stays dynamic in the graph."""
    varying = char_ids != char_ids[:, -1:]  # (N, W)
    positions = torch.arange(1, char_ids.shape[1] + 1)  # (W,)
    keep = torch.clamp((varying * positions).amax() + width, max=char_ids.shape[1])
    return char_ids.index_select(1, torch.arange(keep))  # type: ignore[call-overload]  # a 0-d tensor end


@contextmanager
def untrimmed(cnn: CharCNN) -> Iterator[None]:
    """The char CNN without its own (int-valued) tail trim while a graph is traced; the graph trims instead."""
    own = cnn.trim_tail
    cnn.trim_tail = False
    try:
        yield
    finally:
        cnn.trim_tail = own


class BilmGraph(nn.Module):
    """``BidirectionalLM.forward`` from char ids that already hold <S> and </S> (``add_sentence_boundaries``)."""

    def __init__(self, bilm: BidirectionalLM) -> None:
        super().__init__()
        self.bilm = bilm
        self.recurrence = torch.jit.script(recurrence)
        self.widest = max(conv.kernel_size[0] for conv in bilm.token_encoder.char_cnn.convs)

    def forward(self, char_ids: Tensor) -> Tensor:
        """char_ids (B, S, 50) int64, 0 at padded positions -> layers (L+1, B, S, 2P), 0 at padded positions."""
        batch, steps, width = char_ids.shape
        mask = (char_ids > 0).any(dim=-1)  # (B, S)
        encoder = self.bilm.token_encoder
        # Each distinct token is encoded once, as BidirectionalLM.forward does.
        unique, inverse = torch.unique(char_ids.reshape(-1, width), dim=0, return_inverse=True)
        encoded = encoder.projection(encoder.highway(encoder.char_cnn(trim_tail(unique, self.widest))))
        embeddings = encoded[inverse].reshape(batch, steps, -1) * mask[:, :, None].to(encoded.dtype)
        lengths = mask.sum(dim=1)  # (B,)
        lstm = self.bilm.lstm
        directions = []
        for backward, stack in enumerate((lstm.forward_layers, lstm.backward_layers)):
            x = reverse_within_length(embeddings, lengths) if backward else embeddings
            outputs = []
            for index, cell in enumerate(stack):
                out = self._cell(cell, x, mask)
                if lstm.use_skip_connections and index > 0:
                    out = out + x
                outputs.append(reverse_within_length(out, lengths) if backward else out)
                x = out
            directions.append(outputs)
        layer0 = torch.cat([embeddings, embeddings], dim=-1)
        return torch.stack([layer0] + [torch.cat(pair, dim=-1) for pair in zip(*directions, strict=True)])

    def _cell(self, cell: LstmCellWithProjection, x: Tensor, mask: Tensor) -> Tensor:
        """One layer of one direction: x (B, S, I) -> (B, S, P)."""
        clips = [NO_CLIP if clip is None else float(clip) for clip in (cell.cell_clip, cell.proj_clip)]
        out = self.recurrence(
            cell.input_projection(x).transpose(0, 1),
            mask.t()[:, :, None],
            cell.state_linearity.weight.t(),
            cell.projection.weight.t(),
            clips[0],
            clips[1],
        )
        return out.transpose(0, 1)


class TaggerGraph(nn.Module):
    """``BiLstmCrfTagger.emissions`` from word ids, char ids and the biLM's layers (its cached-layers path)."""

    def __init__(self, tagger: BiLstmCrfTagger) -> None:
        super().__init__()
        self.tagger = tagger

    def forward(self, words: Tensor, chars: Tensor, layers: Tensor | None = None) -> Tensor:
        """words (B, T) int64 (0 = padding), chars (B, T, W) int64, layers (L+1, B, T+2, 2P) -> (B, T, K)."""
        mask = words > 0  # word id 0 is padding only: unknown words are 1
        inputs: dict[str, dict[str, Any]] = {"words": {"ids": words}, "chars": {"ids": chars}}
        if layers is not None:
            positions = torch.arange(words.shape[1] + 2)
            inputs["elmo"] = {
                "layers": list(layers.unbind(0)),
                "mask": positions[None, :] < mask.sum(dim=1)[:, None] + 2,  # (B, T+2)
            }
        batch: Batch = {"mask": mask, "features": inputs}
        return self.tagger.emissions(batch)
