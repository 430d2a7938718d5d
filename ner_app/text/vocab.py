"""Vocabularies (token <-> id) for words, characters and tags, built from the training split only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ner_app.text.tags import entity_types, scheme_tags

PAD, UNK = "<pad>", "<unk>"


class Vocab:
    """A token <-> id mapping.

    With ``specials`` (the default) id 0 is the padding token and id 1 the unknown token, which ``encode``
    returns for tokens it does not know; without (tag vocabularies) unknown tokens raise ``KeyError``.
    With ``lowercase`` tokens are lowercased before lookup, so the vocabulary applies its own normalisation.
    """

    pad_id = 0
    unk_id = 1

    def __init__(self, tokens: Iterable[str], specials: bool = True, lowercase: bool = False) -> None:
        self.specials = specials
        self.lowercase = lowercase
        self.itos: list[str] = [PAD, UNK] if specials else []
        self.itos += tokens
        # a loop in C (a vocabulary with GloVe's words has 400k entries)
        self.stoi: dict[str, int] = dict(zip(self.itos, range(len(self.itos)), strict=True))
        if len(self.stoi) != len(self.itos):  # repeats (or a special among the tokens): the first one counts
            entries, self.itos = self.itos, []
            self.stoi = {}
            for token in entries:
                if token not in self.stoi:
                    self.stoi[token] = len(self.itos)
                    self.itos.append(token)
        # training counts of the entries (set by from_counter; not exported): weights for GloVe coverage
        self.counts: dict[str, int] | None = None

    @classmethod
    def from_counter(
        cls, counter: Mapping[str, int], min_count: int = 1, specials: bool = True, lowercase: bool = False
    ) -> Vocab:
        """Entries with at least ``min_count`` occurrences, most frequent first (ties alphabetically).

        ``counter`` must already be normalised (lowercased when ``lowercase``).
        """
        kept = sorted((t for t, n in counter.items() if n >= min_count), key=lambda t: (-counter[t], t))
        vocab = cls(kept, specials=specials, lowercase=lowercase)
        vocab.counts = {t: counter[t] for t in kept}
        return vocab

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return self.normalize(token) in self.stoi

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return (self.itos, self.specials, self.lowercase) == (other.itos, other.specials, other.lowercase)

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, specials={self.specials}, lowercase={self.lowercase})"

    def normalize(self, token: str) -> str:
        """The lookup form of a token (lowercased when the vocabulary is)."""
        return token.lower() if self.lowercase else token

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of the tokens; unknown ones map to ``unk_id`` (KeyError without specials)."""
        stoi = self.stoi
        if self.lowercase:
            tokens = [t.lower() for t in tokens]
        if self.specials:
            return [stoi.get(t, self.unk_id) for t in tokens]
        try:
            return [stoi[t] for t in tokens]
        except KeyError as err:
            raise KeyError(f"{err.args[0]!r} is not in the vocabulary ({len(self)} entries)") from None

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of the ids."""
        return [self.itos[i] for i in ids]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (``from_dict`` restores it; counts are not kept)."""
        tokens = self.itos[2:] if self.specials else list(self.itos)
        return {"tokens": tokens, "specials": self.specials, "lowercase": self.lowercase}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Vocab:
        """Inverse of ``to_dict``."""
        return cls(
            data["tokens"], specials=bool(data["specials"]), lowercase=bool(data.get("lowercase", False))
        )


def build_word_vocab(sentences: Iterable[Sequence[str]], lowercase: bool = True, min_count: int = 1) -> Vocab:
    """Word vocabulary of the (training) sentences."""
    counter: Counter[str] = Counter()
    for tokens in sentences:
        counter.update([t.lower() for t in tokens] if lowercase else tokens)
    return Vocab.from_counter(counter, min_count=min_count, lowercase=lowercase)


def build_char_vocab(sentences: Iterable[Sequence[str]]) -> Vocab:
    """Character vocabulary (case kept) of the tokens of the (training) sentences."""
    counter: Counter[str] = Counter()
    for tokens in sentences:
        for token in tokens:
            counter.update(token)
    return Vocab.from_counter(counter)


def build_tag_vocab(tag_sequences: Iterable[Sequence[str]], scheme: str) -> Vocab:
    """Tag vocabulary without specials: every tag of ``scheme`` for the entity types seen, "O" first.

    All prefixes of the scheme are included even when a combination never occurs in training (no B-PER in
    CoNLL-2003 IOB1 train, for instance), so any valid sequence of the scheme can be encoded. ``-`` (not
    annotated) is no tag.
    """
    return Vocab(scheme_tags(scheme, entity_types(t for tags in tag_sequences for t in tags)), specials=False)
