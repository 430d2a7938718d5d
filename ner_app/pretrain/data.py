"""Training streams and held-out sentences for biLM pretraining.

The training text becomes one token stream (every sentence ``<S> w1 .. wn </S>``, sentences in a seeded
shuffled order), cut into ``batch_size`` equal contiguous streams, one per batch row, read in windows of
``unroll_steps`` tokens so that the LSTM state of row i carries over from one window to the next. Under DDP
with W processes the stream is cut into W x ``batch_size`` rows and each process reads its own ``batch_size``
(``stream_rows``): every process packs the same epoch from the same seed, so the shares need no messages.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ner_app.bilm.char_mapper import BOS_TOKEN, EOS_TOKEN, token_to_ids
from ner_app.errors import MissingFileError, NerAppError
from ner_app.pretrain.batches import IGNORE, DirectionWindow, TrainingBatch
from ner_app.pretrain.documents import conll_as_text, read_documents
from ner_app.pretrain.vocab import SoftmaxVocab

Shuffle = Literal["sentences", "documents", "none"]
_BOS_TYPE, _EOS_TYPE = 0, 1  # type ids of <S> and </S> in every TrainingText


@dataclass
class TrainingText:
    """A tokenised text as type ids: ``tokens`` (N,) int32 with the boundaries of every sentence included.

    ``types[i]`` is the string of type i (0 ``<S>``, 1 ``</S>``), ``offsets`` (n_sentences + 1,) the start of
    every sentence in ``tokens``, ``documents`` the index of the first sentence of every document.
    """

    tokens: np.ndarray
    offsets: np.ndarray
    documents: np.ndarray
    types: list[str]

    @property
    def num_sentences(self) -> int:
        return len(self.offsets) - 1

    def counts(self) -> dict[str, int]:
        """Frequency of every type in the text (the boundaries included)."""
        return dict(
            zip(self.types, np.bincount(self.tokens, minlength=len(self.types)).tolist(), strict=True)
        )


def read_corpus(
    path: str | Path,
    max_tokens: int | None = None,
    documents: Sequence[int] | None = None,
    extra: Sequence[str | Path] = (),
) -> TrainingText:
    """One sentence per line, tokens separated by whitespace; blank lines separate documents (or a CoNLL file:
    its tokens, ``-DOCSTART-`` starting a document).

        ``documents`` [first, stop) keeps only those documents of ``path`` (0-based, in file order); ``extra``
        files (sentence lines or CoNLL, ``documents.read_documents``) add their documents after it. Reads line by
        line; ``max_tokens`` stops after the sentence that reaches that many tokens (boundaries included).
        Raises NerAppError or MissingFileError with the path in the message.
    """
    path = Path(path)
    if documents is not None and not (len(documents) == 2 and 0 <= documents[0] < documents[1]):
        raise NerAppError(
            f"data.train_documents must be [first, stop) with 0 <= first < stop, found {documents}"
        )
    index = {BOS_TOKEN: _BOS_TYPE, EOS_TOKEN: _EOS_TYPE}
    tokens = array("i")
    offsets, starts = [0], [0]

    def add(words: Sequence[str]) -> bool:
        """Append one sentence; True once ``max_tokens`` is reached."""
        tokens.append(_BOS_TYPE)
        tokens.extend([index.setdefault(w, len(index)) for w in words])
        tokens.append(_EOS_TYPE)
        offsets.append(len(tokens))
        return max_tokens is not None and len(tokens) >= max_tokens

    def new_document() -> None:
        if len(offsets) - 1 > starts[-1]:  # the next sentence starts a new document
            starts.append(len(offsets) - 1)

    lineno, doc, in_doc, full = 0, 0, False, False
    try:
        conll = conll_as_text(path)  # CoNLL files: their tokens, as text
        with path.open(encoding="utf-8") as f:
            for line in f if conll is None else conll:
                lineno += 1
                words = line.split()
                if not words:
                    doc, in_doc = doc + in_doc, False  # the file's document number, kept or not
                    new_document()
                    continue
                in_doc = True
                if documents is not None and not documents[0] <= doc < documents[1]:
                    continue
                if add(words):
                    full = True
                    break
    except UnicodeDecodeError as err:
        raise NerAppError(f"{path}: line {lineno + 1} is not UTF-8 text ({err.reason})") from None
    except OSError as err:
        raise MissingFileError(f"{path}: cannot read corpus: {err.strerror or err}") from None
    for extra_path in [] if full else extra:
        for document in read_documents(extra_path, what="extra training text"):
            new_document()
            if any(add(words) for words in document):
                break
    if len(offsets) < 2:
        where = f" in documents {list(documents)}" if documents is not None else ""
        raise NerAppError(f"{path}: no sentences{where} (expected one tokenised sentence per line)")
    if starts[-1] == len(offsets) - 1:  # trailing blank lines opened a document with no sentence
        starts.pop()
    return TrainingText(
        tokens=np.frombuffer(tokens, dtype=np.int32).copy(),
        offsets=np.asarray(offsets, dtype=np.int64),
        documents=np.asarray(starts, dtype=np.int64),
        types=list(index),
    )


def sentence_order(corpus: TrainingText, shuffle: Shuffle, seed: int, epoch: int) -> np.ndarray:
    """The order (n_sentences,) in which ``pack`` writes the sentences."""
    n = corpus.num_sentences
    rng = np.random.default_rng([seed, epoch])
    if shuffle == "none":
        return np.arange(n)
    if shuffle == "sentences":
        return rng.permutation(n)
    # documents keep their sentences in order, so the carried state sees real context
    bounds = np.append(corpus.documents, n)
    docs = rng.permutation(len(corpus.documents))
    return np.concatenate([np.arange(bounds[d], bounds[d + 1]) for d in docs])


def document_starts(corpus: TrainingText, shuffle: Shuffle, seed: int, epoch: int) -> np.ndarray:
    """(N,) bool: where ``pack``'s stream has the first <S> of a document (none when sentences are shuffled)."""
    flags = np.zeros(len(corpus.tokens), dtype=bool)
    if shuffle != "sentences":
        order = sentence_order(corpus, shuffle, seed, epoch)
        lengths = corpus.offsets[order + 1] - corpus.offsets[order]
        flags[(np.cumsum(lengths) - lengths)[np.isin(order, corpus.documents)]] = True
    return flags


def pack(corpus: TrainingText, shuffle: Shuffle, seed: int, epoch: int) -> np.ndarray:
    """The whole text as one stream (N,) int32: sentences (or whole documents) in a seeded shuffled order."""
    if shuffle == "none":
        return corpus.tokens
    order = sentence_order(corpus, shuffle, seed, epoch)
    starts = corpus.offsets[order]
    lengths = corpus.offsets[order + 1] - starts
    out_starts = np.cumsum(lengths) - lengths
    # Output position j of sentence i reads tokens[starts[i] + j - out_starts[i]].
    source = np.arange(int(lengths.sum())) + np.repeat(starts - out_starts, lengths)
    return corpus.tokens[source]


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
        forward = np.where((nxt == IGNORE) | (nxt == _BOS_TYPE), IGNORE, self.to_softmax[nxt])
        backward = np.where((prev == IGNORE) | (prev == _EOS_TYPE), IGNORE, self.to_softmax[prev])
        type_ids = torch.from_numpy(ids.astype(np.int64))
        return {
            "type_ids": type_ids,
            "char_ids": self.char_table[type_ids].long(),
            "forward_targets": torch.from_numpy(forward),
            "backward_targets": torch.from_numpy(backward),
            "forward_resets": type_ids == _BOS_TYPE,  # where each direction's sentence begins
            "backward_resets": type_ids == _EOS_TYPE,
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
