"""The batches of biLM pretraining: an epoch's packed stream cut into rows and windows.

The stream (``data.pack``) is cut into ``batch_size`` equal contiguous streams, one per batch row, read in
windows of ``unroll_steps`` tokens so that the LSTM state of row i carries over from one window to the next.
Under DDP with W processes the stream is cut into W x ``batch_size`` rows and each process reads its own
``batch_size`` (``stream_rows``): every process packs the same epoch from the same seed, so the shares need no
messages.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from ner_app.bilm.char_mapper import token_to_ids
from ner_app.errors import NerAppError
from ner_app.pretrain.batches import IGNORE, DirectionWindow, TrainingBatch
from ner_app.pretrain.data import BOS_TYPE, EOS_TYPE, Shuffle, TrainingText, document_starts, pack
from ner_app.pretrain.vocab import SoftmaxVocab


def stream_rows(num_tokens: int, batch_size: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
    """(B, S) positions in an epoch's packed stream that process ``rank`` of ``world_size`` reads, row by row.

    The stream is cut into ``world_size * batch_size`` equal rows of S tokens (the remainder, fewer than that
    many tokens, is dropped); process r reads rows rB .. rB + B - 1. The shares are disjoint, together cover
    every kept token, and process r's rows are rows rB .. rB + B - 1 of one process with W x B rows.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, {world_size})")
    length = num_tokens // (batch_size * world_size)
    start = rank * batch_size * length
    return np.arange(start, start + batch_size * length).reshape(batch_size, length)


class StreamBatches:
    """The training batches of one corpus: an iterable of dicts, ``len`` windows per epoch.

    Stream i is row i of every batch. The forward LM reads its stream left to right; the backward LM reads the
    same stream right to left (window k of ``backward`` is the k-th window from the end), so that the state
    carried from one window to the next continues its own direction and never has seen the next targets.
    Each direction: ``char_ids`` (B, T, 50) long in text order, ``targets`` (B, T) long softmax ids
    (forward: the next token, backward: the previous one, ``IGNORE`` where there is none, and for the
    ``</S> -> <S>`` seams between packed sentences, which are certain), ``mask`` (B, T) bool.
    Iteration resumes from ``load_state_dict`` (Lightning saves ``state_dict`` in its checkpoints). Under DDP,
    process ``rank`` of ``world_size`` reads its rows of ``stream_rows``; the position is the same on every
    process (they step together), so rank 0's checkpointed position resumes them all.
    """

    def __init__(
        self,
        corpus: TrainingText,
        vocab: SoftmaxVocab,
        batch_size: int,
        unroll_steps: int,
        shuffle: Shuffle = "sentences",
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.corpus, self.batch_size, self.unroll_steps = corpus, batch_size, unroll_steps
        self.shuffle, self.seed = shuffle, seed
        self.rows = stream_rows(len(corpus.tokens), batch_size, rank, world_size)  # (B, S)
        self.stream_length = self.rows.shape[1]  # tokens per row; the remainder is dropped
        if self.stream_length < 2 or unroll_steps < 1:
            rows = batch_size * world_size
            raise NerAppError(
                f"corpus of {len(corpus.tokens)} tokens is too small for batch_size {batch_size} x {world_size} "
                f"process(es) (each of the {rows} streams needs at least 2 tokens)"
            )
        self.to_softmax = np.array([vocab.id(t) for t in corpus.types], dtype=np.int64)  # type -> softmax row
        self.char_table = torch.tensor(
            [token_to_ids(t) for t in corpus.types], dtype=torch.int16
        )  # (types, 50)
        self._cache: tuple[int, np.ndarray, np.ndarray] | None = None
        self._epoch, self._start = 0, 0  # where the next iterator begins
        self._consumed = (0, 0)  # (epoch, next window) after the last batch the model trained on

    def __len__(self) -> int:
        # S - 1 columns have a target in each direction (the first has none backward, the last none forward): a
        # window of only the last column, when S = qT + 1, would have no target and a loss of 0 / 0
        return -(-(self.stream_length - 1) // self.unroll_steps)

    def streams(self, epoch: int) -> np.ndarray:
        """The packed streams of an epoch (B, S) int32, with a -1 sentinel column at both ends: (B, S + 2)."""
        if self._cache is None or self._cache[0] != epoch:
            flat = pack(self.corpus, self.shuffle, self.seed, epoch)
            padded = np.full((self.batch_size, self.stream_length + 2), IGNORE, dtype=np.int32)
            padded[:, 1:-1] = flat[self.rows]
            doc = np.zeros(padded.shape, dtype=bool)  # document starts, padded like the streams
            doc[:, 1:-1] = document_starts(self.corpus, self.shuffle, self.seed, epoch)[self.rows]
            self._cache = (epoch, padded, doc)
        return self._cache[1]

    def window(self, streams: np.ndarray, start: int, stop: int) -> dict[str, torch.Tensor]:
        """Columns [start, stop) of every stream, with both directions' targets (in the forward layout)."""
        ids = streams[:, start + 1 : stop + 1]
        nxt, prev = streams[:, start + 2 : stop + 2], streams[:, start:stop]
        forward = np.where((nxt == IGNORE) | (nxt == BOS_TYPE), IGNORE, self.to_softmax[nxt])
        backward = np.where((prev == IGNORE) | (prev == EOS_TYPE), IGNORE, self.to_softmax[prev])
        type_ids = torch.from_numpy(ids.astype(np.int64))
        return {
            "type_ids": type_ids,
            "char_ids": self.char_table[type_ids].long(),
            "forward_targets": torch.from_numpy(forward),
            "backward_targets": torch.from_numpy(backward),
            "forward_resets": type_ids == BOS_TYPE,  # where each direction's sentence begins
            "backward_resets": type_ids == EOS_TYPE,
            "mask": torch.ones(ids.shape, dtype=torch.bool),
        }

    def document_resets(self, epoch: int, start: int, stop: int, shift: int) -> torch.Tensor | None:
        """(B, stop - start) bool: where a direction starts a document (docs/document_context.md), the forward
        LM (shift 1) at its first <S>, the backward LM (shift 2) at its last </S>; None for shuffled sentences."""
        if self.shuffle == "sentences":
            return None
        self.streams(epoch)
        assert self._cache is not None
        return torch.from_numpy(self._cache[2][:, start + shift : stop + shift].copy())

    def batch(self, epoch: int, k: int) -> TrainingBatch:
        """Window k of an epoch: forward columns [kT, (k+1)T), backward the k-th T columns from the end."""
        streams, s, t = self.streams(epoch), self.stream_length, self.unroll_steps
        forward_span, backward_span = (k * t, min(s, (k + 1) * t)), (max(0, s - (k + 1) * t), s - k * t)
        fwd, bwd = self.window(streams, *forward_span), self.window(streams, *backward_span)
        return {
            "forward": self._direction(fwd, "forward", self.document_resets(epoch, *forward_span, 1)),
            "backward": self._direction(bwd, "backward", self.document_resets(epoch, *backward_span, 2)),
            "epoch": epoch,
            "window": k,
        }

    @staticmethod
    def _direction(
        window: dict[str, torch.Tensor], direction: str, documents: torch.Tensor | None
    ) -> DirectionWindow:
        return {
            "char_ids": window["char_ids"],
            "targets": window[f"{direction}_targets"],
            "mask": window["mask"],
            "resets": window[f"{direction}_resets"],
            "document_resets": documents,
        }

    def __iter__(self) -> Iterator[TrainingBatch]:
        epoch, start = self._epoch, self._start
        for k in range(start, len(self)):
            if k == len(self) - 1:  # Lightning ends an epoch by its length, without exhausting the iterator
                self._epoch, self._start = epoch + 1, 0
            yield self.batch(epoch, k)

    def mark_consumed(self, epoch: int, window: int) -> None:
        """Record that the model has trained on ``window`` of ``epoch`` (the checkpointed position)."""
        self._consumed = (epoch, window + 1)

    @property
    def position(self) -> tuple[int, int]:
        """(epoch, next window) of the training so far."""
        return self._consumed

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self._consumed[0], "window": self._consumed[1]}

    def load_state_dict(self, state: dict[str, int]) -> None:
        epoch, window = int(state["epoch"]), int(state["window"])
        if window >= len(self):
            epoch, window = epoch + 1, 0
        self._epoch, self._start = epoch, window
        self._consumed = (epoch, window)
