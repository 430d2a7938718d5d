"""The BiLSTM-CRF tagger over the concatenation of its input features (Peters et al. 2018, section 5; Lample
et al. 2016): input [x_k; ...] -> dropout -> BiLSTM -> dropout -> linear -> CRF."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from torch import nn

from ner_app.tagger.batch import Batch, full_steps, row_lengths
from ner_app.tagger.bilstm import BiLstm
from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF
from ner_app.tagger.dropout import RandMaskDropout
from ner_app.tagger.features import InputFeature
from ner_app.tagger.spec import SpecError, TaggerSpec

_FEATURES = "features."  # where the tagger holds its features; their state-dict keys are written without it
_OWN = ("features", "dropout", "lstm", "output", "crf")  # the tagger's own attributes: no feature key's start


class BiLstmCrfTagger(nn.Module):
    """Features (``tagger/features/``) -> [x_k; ...] -> dropout -> BiLSTM -> dropout -> linear -> CRF.

    ``features`` are concatenated in their order; a feature with a representation for the output layer (the
    paper's section 3.3) has it concatenated to the BiLSTM's: dropout([h_k; ...]). ``allowed`` are the CRF's
    scheme constraints. The state dict holds every feature's keys as the feature names them (``word_embed.weight``,
    ``char_cnn.conv.bias``, ...): the keys of weight files written before features were modules.
    """

    def __init__(
        self,
        features: Mapping[str, InputFeature],
        num_tags: int,
        lstm_hidden: int = 200,
        lstm_layers: int = 2,
        dropout: float = 0.5,
        allowed: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        if not features:
            raise ValueError("a tagger needs at least one input feature")
        self.features = nn.ModuleDict(features)
        # each feature's keys (as written) -> the module's own key; a key two features (or the tagger) share is
        # a bug in a feature: refused here
        self._feature_keys: dict[str, str] = {}
        for name, feature in features.items():
            for key in feature.state_dict(keep_vars=True):
                if key in self._feature_keys or key.split(".")[0] in _OWN:
                    raise ValueError(f"input feature {name!r}: state-dict key {key!r} is taken")
                self._feature_keys[key] = f"{_FEATURES}{name}.{key}"
        self.frozen_prefixes = tuple(p for f in features.values() for p in f.frozen_prefixes)
        input_dim = sum(f.output_dim for f in features.values())
        self.dropout = RandMaskDropout(dropout)
        # One bidirectional LSTM per layer, with our dropout between layers (what nn.LSTM's dropout does).
        sizes = [input_dim] + [2 * lstm_hidden] * (lstm_layers - 1)
        self.lstm = nn.ModuleList(BiLstm(size, lstm_hidden) for size in sizes)
        output_dim = 2 * lstm_hidden + sum(f.output_dim_at_output for f in features.values())
        self.output = nn.Linear(output_dim, num_tags)
        self.crf = CRF(num_tags, allowed)
        self.register_state_dict_post_hook(_written_keys)
        self.register_load_state_dict_pre_hook(_read_keys)

    @classmethod
    def from_spec(cls, spec: TaggerSpec, resources: Mapping[str, Any] | None = None) -> BiLstmCrfTagger:
        """A freshly initialised tagger of the spec's shape (weights are loaded separately); ``resources``: what
        a feature needs to be built, by name (a frozen encoder: ``FeatureSpec.load``, ``from_config``)."""
        resources = resources or {}
        # built in the spec's order: the seeded initial weights depend on it
        features = {f.name: f.build(spec, resources.get(f.name)) for f in spec.features}
        s = spec.sizes
        return cls(
            features,
            num_tags=len(spec.tag_vocab),
            lstm_hidden=s.lstm_hidden,
            lstm_layers=s.lstm_layers,
            dropout=s.dropout,
            allowed=allowed_transitions(spec.tag_vocab.itos, spec.scheme),
        )

    def feature(self, name: str) -> InputFeature:
        """The module of input feature ``name`` (``KeyError`` without one)."""
        return cast(InputFeature, self.features[name])

    def frozen(self, key: str) -> bool:
        """Whether state-dict key ``key`` is a frozen feature's (in its own files, never trained)."""
        return key.startswith(self.frozen_prefixes)

    def trained_state(self) -> dict[str, torch.Tensor]:
        """The tensors training changes: everything but the frozen features' (which live in their own files)."""
        return {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items() if not self.frozen(k)}

    def load_trained_state(self, state: dict[str, torch.Tensor], source: str) -> None:
        """Load ``trained_state``'s tensors (a frozen feature's, if present, must equal this one's); ``SpecError``
        names ``source`` when they do not fit this tagger."""
        missing, unexpected = self.load_state_dict(state, strict=False)
        missing = [k for k in map(_written, missing) if not self.frozen(k)]
        if missing or unexpected:
            raise SpecError(
                f"{source}: tensors do not fit the tagger spec (missing {missing}, unexpected {unexpected})"
            )

    def emissions(self, batch: Batch) -> torch.Tensor:
        """Batch with mask (B, T) and every feature's inputs (``batch["features"][name]``) -> emission scores
        (B, T, K)."""
        mask, inputs = batch["mask"], batch["features"]
        parts, at_output = [], []
        for name, feature in self.features.items():
            out = feature(inputs[name])
            parts.append(out.input)
            if out.output is not None:
                at_output.append(out.output)
        dtype = parts[0].dtype  # a frozen encoder's float32 (or bf16) joins the first feature's dtype
        x = self.dropout(torch.cat([p.to(dtype) for p in parts], dim=-1))  # (B, T, D)
        lengths = row_lengths(batch)  # (B,) on the CPU
        h = x
        for i, lstm in enumerate(self.lstm):
            h = cast(BiLstm, lstm).rows(self.dropout(h) if i else h, lengths, mask)  # (B, T, 2H)
        if at_output:
            h = torch.cat([h, *(o.to(h.dtype) for o in at_output)], dim=-1)  # (B, T, 2H + D'): [h_k; ...]
        return self.output(self.dropout(h))

    def loss(self, batch: Batch, l2_coef: float = 0.0) -> torch.Tensor:
        """Summed negative log-likelihood over the batch plus l2_coef times every feature's penalty (the learned
        mixes' ||w||^2).

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
        return self._penalised(nll, l2_coef)

    def distillation_loss(self, batch: Batch, l2_coef: float = 0.0) -> torch.Tensor:
        """The cross-entropy of the teachers' tag marginals ``batch["soft"]`` (B, T, K) under this tagger's own
        CRF marginals, summed over the tokens: -sum_t sum_k q_t(k) log p_t(k), plus the penalties as ``loss``.

        Per-token marginals (not the teachers' expected transitions): K numbers a token to store, averaged over
        an ensemble as they are, and the student's CRF transitions still learn from the gold data."""
        mask = batch["mask"]
        log_p = self.crf.log_marginals(self.emissions(batch), mask, full_steps(batch))  # (B, T, K)
        targets = batch["soft"].to(log_p.dtype)  # (B, T, K), 0 at padding
        cross = -(targets * log_p).sum(dim=2)  # (B, T)
        return self._penalised(torch.where(mask, cross, 0.0).sum(), l2_coef)

    def _penalised(self, loss: torch.Tensor, l2_coef: float) -> torch.Tensor:
        """``loss`` plus l2_coef times every feature's penalty (the learned mixes' ||w||^2)."""
        if l2_coef:
            for feature in self.features.values():
                penalty = cast(InputFeature, feature).l2_penalty()
                if penalty is not None:
                    loss = loss + l2_coef * penalty.to(loss.device)
        return loss

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


def _written(key: str) -> str:
    """A module key as the state dict writes it: a feature's keys without ``features.<name>.``."""
    return key.split(".", 2)[2] if key.startswith(_FEATURES) else key


def _written_keys(module: nn.Module, state: dict[str, Any], prefix: str, metadata: Any) -> None:
    """State-dict hook: every key of the tagger (the last ones written, in order) as ``_written`` names it."""
    inner = prefix + _FEATURES
    if not any(k.startswith(inner) for k in state):
        return
    moved = [(k, state.pop(k)) for k in [k for k in state if k.startswith(prefix)]]
    for key, value in moved:
        state[prefix + _written(key[len(prefix) :])] = value


def _read_keys(module: nn.Module, state: dict[str, Any], prefix: str, metadata: Any, *args: Any) -> None:
    """Load hook: a feature's keys as written (this version's files and every older one) back to the module's."""
    names = cast(BiLstmCrfTagger, module)._feature_keys
    for key in [k for k in state if k.startswith(prefix)]:
        own = names.get(key[len(prefix) :])
        if own is not None:
            state[prefix + own] = state.pop(key)
