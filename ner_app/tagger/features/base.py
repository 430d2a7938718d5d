"""The input features of the tagger's token representation: one protocol, one registry.

The tagger's input x_k is the concatenation of its features' vectors for token k (words, the char CNN, ELMo,
...). A feature is two classes in one module:

- a ``FeatureSpec``: a frozen dataclass of plain values, its part of the ``TaggerSpec`` and of ``tagger.json``
  (``features: [{"name": ..., ...}]``). It builds the feature's module, encodes a batch's sentences into the
  feature's host tensors, loads and exports the feature's own files, and says what a continued run
  (``init_from``) must keep;
- an ``InputFeature``: the ``nn.Module`` the tagger holds, whose forward pass turns those tensors into the
  representation (B, T, D) and, for a feature with ``output_dim_at_output``, a second one concatenated to the
  BiLSTM's output. It says which of its state-dict keys are frozen (not in the trained state), its L2 penalty,
  and, for a frozen encoder whose layers may be cached, its ``CacheSource``.

``FEATURES`` maps a name to its spec class: a new feature is one module and one ``register_feature`` row.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, TypeVar

import torch
from torch import nn

from ner_app.errors import NerAppError
from ner_app.records import Reader, read_record
from ner_app.text.vocab import Vocab

if TYPE_CHECKING:
    from ner_app.config.schema import TrainConfig

FeatureInputs = dict[str, Any]  # a feature's host tensors for a batch (tensors, lists of tensors, contexts)
Stream = tuple[tuple[str, ...], ...]  # the sentences a frozen encoder reads as one stream (document context)


class FeatureError(NerAppError):
    """An input feature name that no registered feature has, or a feature's files that do not fit it."""


class SpecError(NerAppError):
    """A ``tagger.json`` (or the spec inside a checkpoint) that does not describe a tagger."""


class Sizes(Protocol):
    """The tagger's sizes that the built-in features read (``TaggerSizes``)."""

    @property
    def word_dim(self) -> int: ...
    @property
    def char_dim(self) -> int: ...
    @property
    def char_filters(self) -> int: ...
    @property
    def char_width(self) -> int: ...


class SpecView(Protocol):
    """What a feature reads of the ``TaggerSpec`` it belongs to: sizes and vocabularies."""

    @property
    def sizes(self) -> Sizes: ...
    @property
    def word_vocab(self) -> Vocab: ...
    @property
    def char_vocab(self) -> Vocab: ...
    @property
    def num_trainable_words(self) -> int: ...
    @property
    def max_word_chars(self) -> int: ...


class FeatureOutput(NamedTuple):
    """A feature's vectors (B, T, D) for the input layer and, when it has one, (B, T, D') for the output layer."""

    input: torch.Tensor
    output: torch.Tensor | None = None


@dataclass(frozen=True)
class CacheSource:
    """A frozen encoder whose per-sentence layers a feature mixes: what the layer cache stores and serves.

    ``sentence_layers`` gives, for tokenised sentences, ``num_layers`` tensors (B, T+2, ``dim``) (a boundary
    position each side of the sentence) and their mask (B, T+2); ``stream_layers`` gives, per stream, per
    sentence, its layers (``num_layers``, n+2, ``dim``) read in the stream (None: no document context).
    ``module`` is moved to the fill's device and back; ``fingerprint`` names its exact weights (computed by
    ``fingerprint_of`` at its first use: hashing a large encoder's weights is not free)."""

    module: nn.Module
    fingerprint_of: Callable[[], str]
    num_layers: int
    dim: int
    stateful: bool
    sentence_layers: Callable[
        [Sequence[Sequence[str]], torch.device], tuple[list[torch.Tensor], torch.Tensor]
    ]
    stream_layers: Callable[[Sequence[Stream]], list[list[torch.Tensor]]] | None = None

    @functools.cached_property
    def fingerprint(self) -> str:
        return self.fingerprint_of()


class InputFeature(nn.Module):
    """The module of one input feature (see the module doc). Its state-dict keys are the tagger's keys as they
    are: ``word_embed.weight``, ``char_cnn.conv.bias``, ``elmo.scalar_mixes.0.gamma``; so a feature's
    attribute names are unique across features and never ``lstm``, ``output``, ``crf`` or ``dropout``."""

    output_dim: int  # D of the representation for the input layer
    output_dim_at_output: int = 0  # D' of the second representation, for the output layer (0: none)
    frozen_prefixes: tuple[str, ...] = ()  # state-dict keys (prefixes) that are not trained: not exported

    def forward(self, inputs: FeatureInputs) -> FeatureOutput:  # pragma: no cover - the protocol
        raise NotImplementedError

    def l2_penalty(self) -> torch.Tensor | None:
        """The feature's own penalty (times ``elmo.l2_coef`` in the loss); None: none."""
        return None

    def cache_source(self) -> CacheSource | None:
        """The frozen encoder whose layers the layer cache may hold; None: nothing to cache."""
        return None

    def learned_mixes(self) -> list[dict[str, list[float] | float]]:
        """What its learned layer mixes are, as plain numbers (metrics.json); [] without mixes."""
        return []


_S = TypeVar("_S", bound="FeatureSpec")


@dataclass(frozen=True)
class FeatureSpec:
    """A feature's part of the spec (see the module doc); its fields are its entry of ``tagger.json``."""

    name: ClassVar[str] = ""
    # state-dict keys whose dimensions index a vocabulary (``init_from``): per dimension, which (None: none)
    vocab_axes: ClassVar[Mapping[str, tuple[str | None, ...]]] = {}
    # tensors that are the rows of one vocabulary together, in order (the trainable then the frozen words)
    joined_rows: ClassVar[Mapping[tuple[str, ...], str]] = {}

    # ------------------------------------------------------------------------------ the spec and its JSON
    @classmethod
    def from_config(cls: type[_S], cfg: TrainConfig) -> tuple[_S, Any]:
        """The feature's spec part for a training run and its resource for ``build`` (e.g. a loaded model)."""
        return cls(), None

    def to_json(self) -> dict[str, Any]:
        """Its entry of ``tagger.json``'s ``features`` (``read`` inverts it)."""
        return {"name": self.name, **dataclasses.asdict(self)}

    @classmethod
    def read(cls: type[_S], data: Mapping[str, Any], reader: Reader, where: str) -> _S:
        """The entry ``where`` of ``tagger.json``; every field checked by its type."""
        return read_record(cls, {k: v for k, v in data.items() if k != "name"}, reader, where)

    def problem(self, key: str) -> str | None:
        """What is wrong with the values read from ``tagger.json``'s entry ``key`` (one line naming the key),
        beyond their types; None when nothing is."""
        return None

    # ------------------------------------------------------------------------------ the model
    def build(self, spec: SpecView, resource: Any) -> InputFeature:  # pragma: no cover - the protocol
        """A freshly initialised module of this feature (``resource``: ``from_config``'s or ``load``'s)."""
        raise NotImplementedError

    def encode(self, sentences: Sequence[Sequence[str]], spec: SpecView) -> FeatureInputs:
        """The host tensors of a batch of non-empty sentences (padded to the longest, T)."""
        raise NotImplementedError  # pragma: no cover - the protocol

    @property
    def document_positions(self) -> int | None:
        """With document context, the stream size its encoder reads (docs/document_context.md); else None."""
        return None

    @property
    def frozen_fingerprint(self) -> str | None:
        """The fingerprint of the frozen encoder's weights it was trained with; None without one."""
        return None

    # ------------------------------------------------------------------------------ files
    def load(self, path_of: Callable[[str], Path], source: str) -> Any:
        """The resource ``build`` needs from the feature's files (``path_of``: where a path the spec records is,
        checked to stay inside an export), ``FeatureError`` naming ``source`` when they do not fit; None when
        it has no files."""
        return None

    def exported(self, module: InputFeature, folder: Path) -> FeatureSpec:
        """Write the feature's files into an export being written in ``folder``; the spec part naming them."""
        return self

    def continues(self, old: FeatureSpec, source: str) -> str | None:
        """Why a run with this feature cannot continue the export ``source`` with ``old`` (same name), naming the
        config key; None if it can."""
        return None


FEATURES: dict[str, type[FeatureSpec]] = {}


def register_feature(cls: type[_S]) -> type[_S]:
    """Add a feature spec class to the registry under its ``name`` (a class decorator)."""
    if not cls.name or not cls.name.isidentifier():
        raise ValueError(f"an input feature needs a name that is an identifier, got {cls.name!r}")
    FEATURES[cls.name] = cls
    return cls


def feature_class(name: object, key: str, error: type[NerAppError] = FeatureError) -> type[FeatureSpec]:
    """The spec class registered as ``name``; ``error`` names ``key`` and the known names otherwise."""
    if not isinstance(name, str) or name not in FEATURES:
        raise error(f"{key}: unknown input feature {name!r}; expected one of {', '.join(sorted(FEATURES))}")
    return FEATURES[name]
