"""Token representations precomputed for a fixed vocabulary: the char CNN runs once per word type."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ner_app.bilm.char_cnn import TokenEncoder
from ner_app.bilm.char_mapper import BOS_IDS, EOS_IDS, token_to_ids


class TokenCache(nn.Module):
    """A (V + 3, P) table of token representations: row 0 padding, rows 1..V the vocabulary, then <S>, </S>.

    ``forward`` takes word ids (B, T) without boundaries (0 = padding) and returns the biLM's input,
    (B, T+2, P) with <S>/</S> added, and its mask, exactly as the char CNN would compute them.
    """

    def __init__(self, encoder: TokenEncoder, vocab: Sequence[str], batch_size: int = 4096) -> None:
        super().__init__()
        self.vocab = list(vocab)
        self.index = {word: i + 1 for i, word in enumerate(self.vocab)}
        self.bos, self.eos = len(self.vocab) + 1, len(self.vocab) + 2
        ids = torch.tensor([token_to_ids(w) for w in self.vocab] + [BOS_IDS, EOS_IDS], dtype=torch.long)
        param = next(encoder.parameters())
        with torch.no_grad():
            table = encoder.embed_all(ids.to(param.device), batch_size)  # (V + 2, P)
        table = torch.cat([table.new_zeros(1, table.shape[1]), table])  # (V + 3, P)
        self.register_buffer("table", table, persistent=False)

    def word_ids(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Tokenised sentences -> word ids (B, T), 0 at padding; a word outside the vocabulary is an error."""
        longest = max((len(s) for s in sentences), default=0)
        ids = torch.zeros(len(sentences), longest, dtype=torch.long)
        for b, sentence in enumerate(sentences):
            for t, word in enumerate(sentence):
                if word not in self.index:
                    raise KeyError(
                        f"word {word!r} (sentence {b}, position {t}) is not in the cached vocabulary"
                    )
                ids[b, t] = self.index[word]
        return ids

    def forward(self, word_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """word_ids (B, T) -> embeddings (B, T+2, P) with boundaries, mask (B, T+2) bool."""
        batch, steps = word_ids.shape
        lengths = (word_ids > 0).sum(dim=1)  # (B,)
        ids = word_ids.new_zeros(batch, steps + 2)
        ids[:, 1 : steps + 1] = word_ids
        ids[:, 0] = self.bos
        ids[torch.arange(batch, device=ids.device), lengths + 1] = self.eos
        return self.table[ids], ids > 0
