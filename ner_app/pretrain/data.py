"""The training text and held-out sentences for biLM pretraining, and each epoch's packed token stream.

The training text becomes one token stream (every sentence ``<S> w1 .. wn </S>``, sentences in a seeded
shuffled order: ``pack``), which ``streams.py`` cuts into rows and windows.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ner_app.bilm.char_mapper import BOS_TOKEN, EOS_TOKEN
from ner_app.errors import MissingFileError, NerAppError
from ner_app.pretrain.documents import conll_as_text, read_documents

Shuffle = Literal["sentences", "documents", "none"]
BOS_TYPE, EOS_TYPE = 0, 1  # type ids of <S> and </S> in every TrainingText


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
    index = {BOS_TOKEN: BOS_TYPE, EOS_TOKEN: EOS_TYPE}
    tokens = array("i")
    offsets, starts = [0], [0]

    def add(words: Sequence[str]) -> bool:
        """Append one sentence; True once ``max_tokens`` is reached."""
        tokens.append(BOS_TYPE)
        tokens.extend([index.setdefault(w, len(index)) for w in words])
        tokens.append(EOS_TYPE)
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
