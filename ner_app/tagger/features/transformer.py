"""The transformer feature: the paper's learned scalar mix (Peters et al. 2018, Eq. 1) over a frozen Hugging
Face encoder's hidden states, the embedding layer's included, one vector per word (docs/encoders.md).

The mix is ELMo's own ``ScalarMix`` (gamma, softmax weights, the L2 penalty on them times ``elmo.l2_coef``);
only the layers differ: ``WordPieceEncoder`` reads each word's pieces (``transformer_encoder.py``). The encoder's
files travel with an export (``transformer/``), named by their sha256 in the spec, so an export predicts
without the network and without the folder it was trained from; or, exported with ``--encoder-package``, the
export names the installed package they come from instead (``encoder_package.py``), under the same sha256.
Its layers come from the encoder, from the layer cache (``layers`` and ``mask`` in the batch) or, with
document context, from the streams (``context``).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ner_app.bilm.bilm import remove_sentence_boundaries
from ner_app.bilm.document import MAX_POSITIONS, context_layers
from ner_app.bilm.scalar_mix import ScalarMix
from ner_app.limits import check_number, check_size
from ner_app.tagger.features.base import (
    CacheSource,
    FeatureError,
    FeatureInputs,
    FeatureOutput,
    FeatureSpec,
    InputFeature,
    SpecError,
    SpecView,
    register_feature,
)
from ner_app.tagger.features.encoder_package import (
    installed_requirement,
    package_folder,
    requirement_problem,
)
from ner_app.tagger.features.transformer_encoder import (
    POOLINGS,
    TransformerError,
    WordPieceEncoder,
    download,
    encoder_files,
    files_fingerprint,
    load_encoder,
)

if TYPE_CHECKING:
    from ner_app.config.schema import TrainConfig

__all__ = ["TransformerError", "TransformerFeature", "TransformerRef"]

_FOLDER = "transformer"  # an export's copy of the encoder's files
_HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


class TransformerFeature(InputFeature):
    """The mix (B, T, D) of a frozen encoder's L+1 word layers, with dropout after mixing."""

    frozen_prefixes = ("transformer.",)  # the encoder: in its own files, never trained

    def __init__(self, encoder: WordPieceEncoder, do_layer_norm: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.transformer = encoder
        self.transformer_mix = ScalarMix(encoder.num_layers, do_layer_norm)
        self.mix_dropout = nn.Dropout(dropout)
        self.output_dim = encoder.output_dim

    def train(self, mode: bool = True) -> TransformerFeature:
        super().train(mode)
        self.transformer.eval()
        return self

    def layers(self, inputs: FeatureInputs) -> tuple[list[torch.Tensor], torch.Tensor]:
        """L+1 layers (B, T+2, D) and mask (B, T+2): cached (``layers``), read in document streams
        (``context``) or read from the words (``words``)."""
        if "layers" in inputs:
            return inputs["layers"], inputs["mask"]
        with torch.no_grad():
            if "context" in inputs:
                return context_layers(self.transformer.stream_layers, inputs["context"])
            return self.transformer.sentence_layers(inputs["words"])

    def forward(self, inputs: FeatureInputs) -> FeatureOutput:
        layers, mask = self.layers(inputs)
        inner = [remove_sentence_boundaries(layer, mask)[0] for layer in layers]  # L+1 x (B, T, D)
        inner_mask = remove_sentence_boundaries(layers[0], mask)[1]  # (B, T)
        return FeatureOutput(self.mix_dropout(self.transformer_mix(inner, inner_mask)))

    def l2_penalty(self) -> torch.Tensor:
        return self.transformer_mix.l2_penalty()

    def learned_mixes(self) -> list[dict[str, list[float] | float]]:
        return [self.transformer_mix.learned()]

    def cache_source(self) -> CacheSource:
        encoder = self.transformer
        return CacheSource(
            module=encoder,
            fingerprint_of=lambda: files_fingerprint(encoder.files),
            num_layers=encoder.num_layers,
            dim=encoder.output_dim,
            stateful=False,
            sentence_layers=encoder.sentence_layers,
            stream_layers=encoder.stream_layers,
        )


@register_feature
@dataclass(frozen=True)
class TransformerRef(FeatureSpec):
    """The frozen encoder a tagger was trained with: its folder (``transformer/`` in an export), the fingerprint
    of its files (``config``: its config.json, beside the others), how words are pooled and read, and the mix's dropout and layer norm."""

    name = "transformer"

    config: str  # the encoder's config.json: its folder holds the other files
    fingerprint: str
    pooling: str = "first"
    window: int = 510  # pieces per window, the special pieces not counted
    dropout: float = 0.0
    do_layer_norm: bool = False
    context: str = "sentence"  # or "document": neighbouring sentences as extra context
    max_stream_positions: int = MAX_POSITIONS  # document context: the chunk size of long documents
    hub: str | None = None  # the hub name it was downloaded as, if it was
    # 'name==version': the installed package holding the encoder's files, when the export does not carry them
    package: str | None = None

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> tuple[TransformerRef, WordPieceEncoder]:
        from ner_app.config.schema import ConfigError

        t = cfg.transformer
        if (t.folder is None) == (t.hub is None):
            raise ConfigError(
                "the transformer feature needs one of transformer.folder (a local Hugging Face model folder) "
                "or transformer.hub (a hub name, downloaded where the network allows)"
            )
        if t.hub is not None and not _HUB_NAME.fullmatch(t.hub):
            raise ConfigError(
                f"transformer.hub: expected a hub name like 'bert-base-cased' or 'org/name', found {t.hub!r}"
            )
        check_number(t.dropout, "transformer.dropout", "config", 0.0, 0.99)
        check_size(t.max_stream_positions, "transformer.max_stream_positions", "config", low=2, high=1 << 30)
        if t.window is not None:
            check_size(t.window, "transformer.window", "config", high=1 << 20)
        folder = Path(t.folder) if t.folder is not None else download(str(t.hub))
        encoder = load_encoder(folder, t.pooling, t.window)
        ref = cls(
            config=str((folder / "config.json").resolve()),
            fingerprint=files_fingerprint(encoder.files),
            pooling=t.pooling,
            window=encoder.window,
            dropout=t.dropout,
            do_layer_norm=t.do_layer_norm,
            context=t.context,
            max_stream_positions=t.max_stream_positions,
            hub=t.hub,
        )
        return ref, encoder

    def problem(self, key: str) -> str | None:
        if self.package is not None and (problem := requirement_problem(self.package)):
            return f"key '{key}.package': {problem}"
        if self.context not in ("sentence", "document"):
            return f"key '{key}.context': expected 'sentence' or 'document', found {self.context!r}"
        if self.pooling not in POOLINGS:
            return f"key '{key}.pooling': expected one of {', '.join(POOLINGS)}, found {self.pooling!r}"
        if not 1 <= self.window <= 1 << 20 or not 2 <= self.max_stream_positions <= 1 << 30:
            return f"key '{key}.window' or '{key}.max_stream_positions': out of range"
        if not 0.0 <= self.dropout < 1.0:
            return f"key '{key}.dropout': expected a number in [0, 1), found {self.dropout}"
        return None

    def build(self, spec: SpecView, resource: Any) -> TransformerFeature:
        if not isinstance(resource, WordPieceEncoder):
            raise SpecError("this tagger was trained with a transformer: its encoder is needed to build it")
        return TransformerFeature(resource, self.do_layer_norm, self.dropout)

    def encode(self, sentences: Sequence[Sequence[str]], spec: SpecView) -> FeatureInputs:
        return {"words": [list(s) for s in sentences]}  # the encoder cuts them into pieces itself

    @property
    def document_positions(self) -> int | None:
        return self.max_stream_positions if self.context == "document" else None

    @property
    def frozen_fingerprint(self) -> str:
        return self.fingerprint

    def load(self, path_of: Callable[[str], Path], source: str) -> WordPieceEncoder:
        """The encoder of the recorded folder (or package), checked against the fingerprint before it is
        loaded."""
        if self.package is not None:
            try:
                return load_encoder(package_folder(self.package, self.fingerprint), self.pooling, self.window)
            except TransformerError as err:
                raise FeatureError(f"{source}: {err}") from err
        folder = path_of(self.config).parent
        try:
            files = encoder_files(folder)
        except TransformerError as err:
            raise FeatureError(f"{source}: {err}") from err
        for name in files:  # in an export, each one a regular file inside it
            path_of(str(Path(self.config).parent / name))
        found = files_fingerprint(files)
        if found != self.fingerprint:
            raise FeatureError(
                f"{source}: the transformer's files in {folder} differ from those the tagger was trained with "
                f"(fingerprint {found[:16]}..., expected {self.fingerprint[:16]}...)"
            )
        return load_encoder(folder, self.pooling, self.window)

    def exported(self, module: InputFeature, folder: Path) -> TransformerRef:
        assert isinstance(module, TransformerFeature)
        if self.package is not None:  # the package's files: named, not copied
            return self
        target = folder / _FOLDER
        target.mkdir()
        for name, path in module.transformer.files.items():  # the exact bytes: the fingerprint still holds
            shutil.copyfile(path, target / name)
        return dataclasses.replace(self, config=f"{_FOLDER}/config.json")

    def by_package(self, name: str) -> TransformerRef:
        """This spec with the encoder named by the installed package ``name`` (pinned to its version) instead of
        carried by the export; one line when the package does not hold exactly this encoder."""
        requirement = installed_requirement(name)
        package_folder(requirement, self.fingerprint)  # extracted once here, and its fingerprint checked
        return dataclasses.replace(self, package=requirement, config="config.json")

    def continues(self, old: FeatureSpec, source: str) -> str | None:
        assert isinstance(old, TransformerRef)
        if self.fingerprint != old.fingerprint:
            folder = f"{source}/{_FOLDER}"
            if old.package is not None:  # the export names its encoder's package: the folder load reads
                try:
                    folder = str(package_folder(old.package, old.fingerprint))
                except TransformerError as err:
                    return str(err)
            return (
                f"transformer.folder names another encoder than the export's (fingerprint {self.fingerprint[:12]}..., "
                f"the export's {old.fingerprint[:12]}...); set transformer.folder={folder}"
            )
        for key in ("pooling", "window", "do_layer_norm", "context"):
            a, b = getattr(self, key), getattr(old, key)
            if a != b:
                return f"transformer.{key} is {a!r} in this run but {b!r} in the export; set transformer.{key}={b} to continue training it"
        return None
