"""The ELMo feature (Peters et al. 2018): learned scalar mixes of a frozen biLM's layers, ELMo_k for the input
and, with ``at_output``, a second mix ELMo_k^task for the output layer (the paper's section 3.3).

The biLM lives in its own files (an export's ``bilm/``), named with their fingerprint in the spec; it reads each
sentence alone or, with document context, the sentence in its document's stream (docs/document_context.md). Its
layers come from the biLM, from the layer cache (``layers`` and ``mask`` in the batch), or from the streams
(``context`` in the batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.document import MAX_POSITIONS, context_layers, stream_layers
from ner_app.bilm.elmo import Elmo
from ner_app.bilm.weights import bilm_fingerprint, load_bilm, save_bilm
from ner_app.tagger.features.base import (
    CacheSource,
    FeatureError,
    FeatureInputs,
    FeatureOutput,
    FeatureSpec,
    InputFeature,
    SpecError,
    SpecView,
    Stream,
    register_feature,
)

if TYPE_CHECKING:
    from ner_app.config.schema import TrainConfig


class ElmoFeature(InputFeature):
    """ELMo_k (B, T, 2P) of every mix of ``elmo`` (one biLM pass feeds them all); with ``at_output`` the second
    mix is the representation for the output layer."""

    frozen_prefixes = ("elmo.bilm.",)  # the biLM: in its own files, never trained

    def __init__(self, elmo: Elmo, at_output: bool = False) -> None:
        super().__init__()
        if at_output and len(elmo.scalar_mixes) != 2:
            raise ValueError("ELMo at the output needs an Elmo module with two mixes (input and output)")
        self.elmo = elmo
        self.at_output = at_output
        self.output_dim = elmo.output_dim
        self.output_dim_at_output = elmo.output_dim if at_output else 0

    def representations(self, inputs: FeatureInputs) -> list[torch.Tensor]:
        """ELMo_k (B, T, 2P) of every mix, from one set of biLM layers: the cached ones (``layers``, L+1 x
        (B, T+2, 2P), and ``mask``), else the frozen biLM run once on each sentence's stream (``context``,
        document mode) or on the sentences' char ids (``chars``, (B, T, 50))."""
        if "layers" in inputs:
            return self.elmo.mix(inputs["layers"], inputs["mask"]).representations
        if "context" in inputs:  # document mode without a cache: each sentence read in its stream
            with torch.no_grad():
                layers, mask = context_layers(self.elmo.bilm, inputs["context"])
            return self.elmo.mix(layers, mask).representations
        return self.elmo(inputs["chars"]).representations

    def forward(self, inputs: FeatureInputs) -> FeatureOutput:
        mixed = self.representations(inputs)
        return FeatureOutput(mixed[0], mixed[1] if self.at_output else None)

    def l2_penalty(self) -> torch.Tensor:
        return self.elmo.l2_penalty()

    def learned_mixes(self) -> list[dict[str, list[float] | float]]:
        return self.elmo.learned_mixes()

    def cache_source(self) -> CacheSource:
        return bilm_source(self.elmo.bilm)


def bilm_source(bilm: BidirectionalLM) -> CacheSource:
    """The biLM as the layer cache's source of layers."""

    def sentence_layers(
        sentences: Sequence[Sequence[str]], device: torch.device
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        out = bilm(batch_to_ids(sentences).to(device))
        return out.layers, out.mask

    def streams(chosen: Sequence[Stream]) -> list[list[torch.Tensor]]:
        return stream_layers(bilm, chosen)

    return CacheSource(
        module=bilm,
        fingerprint_of=lambda: bilm_fingerprint(bilm),
        num_layers=bilm.num_layers,
        dim=bilm.output_dim,
        stateful=bilm.stateful,
        sentence_layers=sentence_layers,
        stream_layers=streams,
    )


@register_feature
@dataclass(frozen=True)
class ElmoRef(FeatureSpec):
    """The frozen biLM a tagger was trained with: its files, the fingerprint of its weights, and the mix's
    dropout and layer norm."""

    name = "elmo"

    options: str
    weights: str
    fingerprint: str
    dropout: float
    do_layer_norm: bool
    context: str = "sentence"  # or "document": what the biLM reads (docs/document_context.md)
    max_stream_positions: int = MAX_POSITIONS  # document context: the chunk size of long documents
    at_output: bool = False  # a second mix, concatenated to the BiLSTM output (paper, section 3.3)

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> tuple[ElmoRef, BidirectionalLM]:
        e = cfg.elmo
        if not e.options or not e.weights:
            from ner_app.config.schema import ConfigError

            raise ConfigError(
                "the elmo feature needs elmo.options and elmo.weights (paths to options.json and hdf5)"
            )
        bilm = load_bilm(e.options, e.weights)
        ref = cls(
            options=str(Path(e.options).resolve()),
            weights=str(Path(e.weights).resolve()),
            fingerprint=bilm_fingerprint(bilm),
            dropout=e.dropout,
            do_layer_norm=e.do_layer_norm,
            context=e.context,
            max_stream_positions=e.max_stream_positions,
            at_output=e.at_output,
        )
        return ref, bilm

    def problem(self, key: str) -> str | None:
        if self.context not in ("sentence", "document"):
            return f"key '{key}.context': expected 'sentence' or 'document', found {self.context!r}"
        return None

    def build(self, spec: SpecView, resource: Any) -> ElmoFeature:
        if not isinstance(resource, BidirectionalLM):
            raise SpecError("this tagger was trained with ELMo: a biLM is needed to build it")
        mixes = 2 if self.at_output else 1
        elmo = Elmo(resource, mixes, dropout=self.dropout, do_layer_norm=self.do_layer_norm)
        return ElmoFeature(elmo, self.at_output)

    def encode(self, sentences: Sequence[Sequence[str]], spec: SpecView) -> FeatureInputs:
        return {"chars": batch_to_ids(sentences)}  # (B, T, 50)

    @property
    def document_positions(self) -> int | None:
        return self.max_stream_positions if self.context == "document" else None

    @property
    def frozen_fingerprint(self) -> str:
        return self.fingerprint

    def load(self, path_of: Callable[[str], Path], source: str) -> BidirectionalLM:
        """The biLM, checked against the fingerprint."""
        bilm = load_bilm(path_of(self.options), path_of(self.weights))
        found = bilm_fingerprint(bilm)
        if self.fingerprint != found:
            raise FeatureError(
                f"{source}: the biLM weights differ from those the tagger was trained with "
                f"(fingerprint {found[:16]}..., expected {self.fingerprint[:16]}...)"
            )
        return bilm

    def exported(self, module: InputFeature, folder: Path) -> ElmoRef:
        assert isinstance(module, ElmoFeature)
        save_bilm(module.elmo.bilm, folder / "bilm")  # exact: the public format round-trips bit for bit
        return dataclasses.replace(self, options="bilm/options.json", weights="bilm/weights.hdf5")

    def continues(self, old: FeatureSpec, source: str) -> str | None:
        assert isinstance(old, ElmoRef)
        if self.fingerprint != old.fingerprint:
            return (
                f"elmo.options/elmo.weights name another biLM than the export's (fingerprint "
                f"{self.fingerprint[:12]}..., the export's {old.fingerprint[:12]}...); set "
                f"elmo.options={source}/bilm/options.json elmo.weights={source}/bilm/weights.hdf5"
            )
        for key in ("at_output", "do_layer_norm", "context"):
            a, b = getattr(self, key), getattr(old, key)
            if a != b:
                return f"elmo.{key} is {a!r} in this run but {b!r} in the export; set elmo.{key}={b} to continue training it"
        return None
