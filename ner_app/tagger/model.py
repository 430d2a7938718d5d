"""The [x_k; ELMo_k] BiLSTM-CRF tagger (Peters et al. 2018, section 5; Lample et al. 2016)."""

from __future__ import annotations

import dataclasses
from typing import cast

import torch
from torch import nn

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.document import context_layers
from ner_app.bilm.elmo import Elmo
from ner_app.tagger.batch import Batch, full_steps, row_lengths
from ner_app.tagger.bilstm import BiLstm
from ner_app.tagger.char_features import WordCharCNN
from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF
from ner_app.tagger.dropout import RandMaskDropout
from ner_app.tagger.spec import SpecError, TaggerSpec

BILM_PREFIX = "elmo.bilm."  # state-dict keys of the frozen biLM, which lives in its own files


class BiLstmCrfTagger(nn.Module):
    """x_k = [word embedding; char CNN feature]; input [x_k; ELMo_k] -> dropout -> BiLSTM -> dropout -> linear -> CRF.

    ``elmo`` is optional (the baseline has none). With ``elmo_at_output`` the Elmo module has a second mix of
    the same biLM layers, ELMo_k^task, and the output layer reads dropout([h_k; ELMo_k^task]) (the paper's
    section 3.3). ``allowed`` are the CRF's scheme constraints.
    """

    frozen_word_vectors: torch.Tensor  # buffer (V - num_words, word_dim)

    def __init__(
        self,
        num_words: int,
        num_chars: int,
        num_tags: int,
        word_dim: int = 50,
        char_dim: int = 16,
        char_filters: int = 128,
        char_width: int = 3,
        lstm_hidden: int = 200,
        lstm_layers: int = 2,
        dropout: float = 0.5,
        elmo: Elmo | None = None,
        allowed: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
        frozen_words: int = 0,
        elmo_at_output: bool = False,
    ) -> None:
        super().__init__()
        if elmo_at_output and (elmo is None or len(elmo.scalar_mixes) != 2):
            raise ValueError("elmo_at_output needs an Elmo module with two mixes (input and output)")
        self.word_embed = nn.Embedding(num_words, word_dim, padding_idx=0)
        # Pretrained vectors of words never seen in train (ids num_words...): looked up, never trained.
        self.register_buffer("frozen_word_vectors", torch.zeros(frozen_words, word_dim))
        self.char_cnn = WordCharCNN(num_chars, char_dim, char_filters, char_width)
        self.elmo = elmo
        input_dim = word_dim + char_filters + (elmo.output_dim if elmo is not None else 0)
        self.dropout = RandMaskDropout(dropout)
        # One bidirectional LSTM per layer, with our dropout between layers (what nn.LSTM's dropout does).
        sizes = [input_dim] + [2 * lstm_hidden] * (lstm_layers - 1)
        self.lstm = nn.ModuleList(BiLstm(size, lstm_hidden) for size in sizes)
        self.elmo_at_output = elmo_at_output
        output_dim = 2 * lstm_hidden + (elmo.output_dim if elmo is not None and elmo_at_output else 0)
        self.output = nn.Linear(output_dim, num_tags)
        self.crf = CRF(num_tags, allowed)

    @classmethod
    def from_spec(cls, spec: TaggerSpec, bilm: BidirectionalLM | None) -> BiLstmCrfTagger:
        """A freshly initialised tagger of the spec's shape (weights are loaded separately)."""
        elmo = None
        if spec.elmo is not None:
            if bilm is None:
                raise SpecError("this tagger was trained with ELMo: a biLM is needed to build it")
            mixes = 2 if spec.elmo.at_output else 1
            elmo = Elmo(bilm, mixes, dropout=spec.elmo.dropout, do_layer_norm=spec.elmo.do_layer_norm)
        trainable = spec.num_trainable_words
        return cls(
            num_words=trainable,
            frozen_words=len(spec.word_vocab) - trainable,
            num_chars=len(spec.char_vocab),
            num_tags=len(spec.tag_vocab),
            elmo=elmo,
            allowed=allowed_transitions(spec.tag_vocab.itos, spec.scheme),
            elmo_at_output=spec.elmo is not None and spec.elmo.at_output,
            **dataclasses.asdict(spec.sizes),
        )

    def trained_state(self) -> dict[str, torch.Tensor]:
        """The tensors training changes: everything but the frozen biLM (which lives in its own files)."""
        return {
            k: v.detach().cpu().contiguous()
            for k, v in self.state_dict().items()
            if not k.startswith(BILM_PREFIX)
        }

    def load_trained_state(self, state: dict[str, torch.Tensor], source: str) -> None:
        """Load ``trained_state``'s tensors (the biLM's, if present, must equal this one's); ``SpecError``
        names ``source`` when they do not fit this tagger."""
        missing, unexpected = self.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.startswith(BILM_PREFIX)]
        if missing or unexpected:
            raise SpecError(
                f"{source}: tensors do not fit the tagger spec (missing {missing}, unexpected {unexpected})"
            )

    def init_word_embeddings(self, vectors: torch.Tensor) -> None:
        """Copy pretrained vectors (V, word_dim), e.g. GloVe: train words first, then the frozen words."""
        n = self.word_embed.num_embeddings
        with torch.no_grad():
            self.word_embed.weight.copy_(vectors[:n])
            self.frozen_word_vectors.copy_(vectors[n:])

    def embed_words(self, words: torch.Tensor) -> torch.Tensor:
        """words (B, T) -> (B, T, word_dim): trainable rows for train words, frozen rows for the others."""
        n = self.word_embed.num_embeddings
        trainable = self.word_embed(words.clamp(max=n - 1))
        if self.frozen_word_vectors.shape[0] == 0:
            return trainable
        frozen = nn.functional.embedding((words - n).clamp(min=0), self.frozen_word_vectors)
        return torch.where((words >= n)[..., None], frozen, trainable)

    def elmo_representations(self, batch: Batch) -> list[torch.Tensor]:
        """ELMo_k (B, T, 2P) of every mix (input, then output), from one set of biLM layers: the cached ones
        when the batch has them (``elmo_layers``, L+1 x (B, T+2, 2P), and ``elmo_mask``), else by running the
        frozen biLM once on each sentence's stream (``elmo_context``, document mode) or on ``elmo_chars``."""
        assert self.elmo is not None
        if "elmo_layers" in batch:
            return self.elmo.mix(batch["elmo_layers"], batch["elmo_mask"]).representations
        if "elmo_context" in batch:  # document mode without a cache: each sentence read in its stream
            with torch.no_grad():
                layers, mask = context_layers(self.elmo.bilm, batch["elmo_context"])
            return self.elmo.mix(layers, mask).representations
        return self.elmo(batch["elmo_chars"]).representations

    def emissions(self, batch: Batch) -> torch.Tensor:
        """Batch with words (B, T), chars (B, T, W), mask (B, T) and elmo_chars (B, T, 50) or cached elmo_layers
        -> emission scores (B, T, K)."""
        mask = batch["mask"]
        parts = [self.embed_words(batch["words"]), self.char_cnn(batch["chars"])]
        elmo = self.elmo_representations(batch) if self.elmo is not None else []
        if elmo:
            parts.append(elmo[0].to(parts[0].dtype))
        x = self.dropout(torch.cat(parts, dim=-1))  # (B, T, D)
        lengths = row_lengths(batch)  # (B,) on the CPU
        h = x
        for i, lstm in enumerate(self.lstm):
            h = cast(BiLstm, lstm).rows(self.dropout(h) if i else h, lengths, mask)  # (B, T, 2H)
        if self.elmo_at_output:
            h = torch.cat([h, elmo[1].to(h.dtype)], dim=-1)  # (B, T, 2H + 2P): [h_k; ELMo_k^task]
        return self.output(self.dropout(h))

    def loss(self, batch: Batch, l2_coef: float = 0.0) -> torch.Tensor:
        """Summed negative log-likelihood over the batch plus l2_coef * ||w||^2 on the ELMo mix weights.

        With ``known`` in the batch, a sentence with unannotated tags counts the probability of every path
        through its annotated ones (``CRF.forward``); fully annotated sentences count exactly as without it."""
        # A batch from ``encode_batch`` is valid by construction and says on the host whether a tag is missing:
        # the CRF then neither checks it nor asks the device whether every tag is known.
        checked = "partial" in batch
        known = batch.get("known") if batch.get("partial", True) else None
        full = full_steps(batch)
        emissions = self.emissions(batch)  # (B, T, K)
        nll = -self.crf(
            emissions, batch["tags"], batch["mask"], known, checked=checked, full_steps=full
        ).sum()
        if self.elmo is not None and l2_coef:
            nll = nll + l2_coef * self.elmo.l2_penalty().to(nll.device)
        return nll

    @torch.no_grad()
    def decode(self, batch: Batch) -> torch.Tensor:
        """Viterbi tag ids (B, T), 0 at padded positions."""
        checked = "tokens" in batch  # built by encode_batch: the mask is valid by construction
        return self.crf.decode(self.emissions(batch), batch["mask"], checked, full_steps(batch))[0]

    @torch.no_grad()
    def decode_scored(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The Viterbi path (B, T) under the scheme's constraints, 0 at padding, and each chosen tag's marginal
        probability (B, T) float32 (forward-backward over the same emissions): the tags training's prediction
        loop writes. ``predict``'s entity scores are the probabilities of readings (``readings.py``)."""
        emissions = self.emissions(batch)  # (B, T, K)
        # encode_batch's masks are valid by construction: the CRF need not ask the device again
        mask, full = batch["mask"], full_steps(batch)
        paths = self.crf.decode(emissions, mask, checked=True, full_steps=full)[0]  # (B, T)
        marginals = self.crf.marginals(emissions, mask, checked=True, full_steps=full)  # (B, T, K)
        chosen = marginals.gather(-1, paths[..., None])[..., 0]  # (B, T)
        return paths, chosen.float()
