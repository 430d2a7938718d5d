"""``Vocab``'s fast build (one dict in C) against the plain loop it replaces: the same ids for any token list,
repeats and special tokens included."""

from __future__ import annotations

import random

import pytest

from ner_app.text.vocab import PAD, UNK, Vocab


def reference(tokens: list[str], specials: bool) -> tuple[list[str], dict[str, int]]:
    itos = [PAD, UNK] if specials else []
    stoi = {t: i for i, t in enumerate(itos)}
    for token in tokens:
        if token not in stoi:
            stoi[token] = len(itos)
            itos.append(token)
    return itos, stoi


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("specials", [True, False])
def test_vocab_matches_the_loop(seed, specials):
    rng = random.Random(seed)
    pool = ["a", "b", "B", "é", "", " ", PAD, UNK, *(f"w{i}" for i in range(30))]
    tokens = [rng.choice(pool) for _ in range(rng.randrange(0, 60))]
    if seed % 2:
        tokens = list(dict.fromkeys(tokens))  # no repeats: the fast path alone
    vocab = Vocab(iter(tokens), specials=specials)  # any iterable, as before
    assert (vocab.itos, vocab.stoi) == reference(tokens, specials)
