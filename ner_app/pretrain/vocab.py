"""The softmax vocabulary of biLM pretraining: frequency-sorted words after ``<S>``, ``</S>``, ``<UNK>``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ner_app.bilm.char_mapper import BOS_TOKEN, EOS_TOKEN
from ner_app.errors import NerAppError
from ner_app.files import write_text
from ner_app.text.lines import read_lines

UNK_TOKEN = "<UNK>"
SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)  # ids 0, 1, 2, as in the reference vocab files
BOS_ID, EOS_ID, UNK_ID = 0, 1, 2


class SoftmaxVocab:
    """Token <-> softmax row. Rows are sorted by training frequency, which the log-uniform sampler assumes."""

    def __init__(self, tokens: Sequence[str]) -> None:
        if tuple(tokens[:3]) != SPECIALS:
            raise ValueError(
                f"a softmax vocabulary must start with {', '.join(SPECIALS)}, found {tokens[:3]}"
            )
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise ValueError("a softmax vocabulary must not repeat a token")

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        """The softmax row of ``token``; words outside the vocabulary are ``<UNK>``."""
        return self.index.get(token, UNK_ID)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        return [self.index.get(t, UNK_ID) for t in tokens]

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], size: int) -> SoftmaxVocab:
        """The ``size - 3`` most frequent words (ties broken by the word, for determinism) after the specials."""
        if size < len(SPECIALS):
            raise ValueError(f"vocabulary size must be at least {len(SPECIALS)}, found {size}")
        words = sorted((w for w in counts if w not in SPECIALS), key=lambda w: (-counts[w], w))
        return cls([*SPECIALS, *words[: size - len(SPECIALS)]])

    def save(self, path: str | Path) -> None:
        """``vocab.txt``: one token per line, the reference's format; written atomically."""
        write_text(path, "".join(f"{t}\n" for t in self.tokens))

    @classmethod
    def load(cls, path: str | Path) -> SoftmaxVocab:
        lines = read_lines(path, "vocabulary")
        try:
            return cls([line.strip() for line in lines if line.strip()])
        except ValueError as err:
            raise NerAppError(f"{path}: {err}") from None
