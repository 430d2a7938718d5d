"""The biLM's ``options.json`` (docs/bilm_reference.md section 7), validated, with exact messages on bad input."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.char_mapper import MAX_CHARS, N_CHARACTERS
from ner_app.config.schema import BilmShape
from ner_app.errors import NerAppError
from ner_app.files import write_text
from ner_app.limits import MAX_CHAR_WIDTH, MAX_LAYERS, MAX_OPTIONS_BYTES, check_size
from ner_app.records import read_json


class OptionsError(NerAppError):
    """An options.json that is not valid for the biLM."""


SHAPE_KEYS = tuple(f.name for f in dataclasses.fields(BilmShape))  # BidirectionalLM's keyword arguments too


@dataclass
class BilmOptions(BilmShape):
    """Architecture of a biLM, exactly the content of a public ``options.json``: the fields of ``BilmShape``
    (config/schema.py, whose defaults are the original ELMo's), with ``filters`` as (width, count) tuples."""

    def __post_init__(self) -> None:
        self.filters = tuple((w, c) for w, c in self.filters)

    @classmethod
    def of(cls, shape: BilmShape) -> BilmOptions:
        """The options of a config's biLM (``BilmModelConfig`` is a ``BilmShape``)."""
        return cls(**{key: getattr(shape, key) for key in SHAPE_KEYS})

    @classmethod
    def from_dict(cls, options: dict[str, Any], source: str = "options") -> BilmOptions:
        """Validate a parsed options.json; ``source`` names the file in error messages."""

        def get(section: str, key: str, kinds: tuple[type, ...], default: Any = ...) -> Any:
            block = options.get(section)
            if not isinstance(block, dict):
                raise OptionsError(f"{source}: missing section '{section}' (a JSON object)")
            if key not in block:
                if default is ...:
                    raise OptionsError(f"{source}: missing '{section}.{key}'")
                return default
            value = block[key]
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                names = " or ".join(k.__name__ for k in kinds)
                raise OptionsError(f"{source}: '{section}.{key}' must be {names}, found {value!r}")
            return value

        embedding = get("char_cnn", "embedding", (dict,))
        if not isinstance(embedding.get("dim"), int):
            raise OptionsError(f"{source}: missing 'char_cnn.embedding.dim' (an integer)")
        filters = get("char_cnn", "filters", (list,))
        if not filters or not all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(x, int) and x > 0 for x in f)
            for f in filters
        ):
            raise OptionsError(
                f"{source}: 'char_cnn.filters' must be a list of [width, count] pairs, found {filters!r}"
            )
        activation = get("char_cnn", "activation", (str,), "relu")
        if activation not in ("relu", "tanh"):
            raise OptionsError(
                f"{source}: 'char_cnn.activation' must be 'relu' or 'tanh', found {activation!r}"
            )
        n_chars = get("char_cnn", "n_characters", (int,), N_CHARACTERS)
        if n_chars not in (N_CHARACTERS - 1, N_CHARACTERS):  # 261 in training options, 262 in released ones
            raise OptionsError(f"{source}: 'char_cnn.n_characters' must be 261 or 262, found {n_chars}")
        max_chars = get("char_cnn", "max_characters_per_token", (int,), MAX_CHARS)
        if max_chars != MAX_CHARS:
            raise OptionsError(
                f"{source}: 'char_cnn.max_characters_per_token' must be {MAX_CHARS}, found {max_chars}"
            )
        number = (int, float)
        clips = [get("lstm", k, number + (type(None),), None) for k in ("cell_clip", "proj_clip")]
        for key, clip in zip(("cell_clip", "proj_clip"), clips, strict=True):
            if clip is not None and not (
                math.isfinite(clip) and clip > 0
            ):  # -1 would clamp every value to -1
                raise OptionsError(f"{source}: 'lstm.{key}' must be a positive number or null, found {clip}")
        return _bounded(
            source,
            cls(
                char_dim=embedding["dim"],
                filters=tuple((w, c) for w, c in filters),
                n_highway=get("char_cnn", "n_highway", (int,)),
                activation=cast(Any, activation),
                lstm_dim=get("lstm", "dim", (int,)),
                projection_dim=get("lstm", "projection_dim", (int,)),
                n_layers=get("lstm", "n_layers", (int,)),
                cell_clip=None if clips[0] is None else float(clips[0]),
                proj_clip=None if clips[1] is None else float(clips[1]),
                use_skip_connections=get("lstm", "use_skip_connections", (bool,), False),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """The options.json content, in the layout of the released files."""
        return {
            "lstm": {
                "cell_clip": self.cell_clip,
                "use_skip_connections": self.use_skip_connections,
                "n_layers": self.n_layers,
                "proj_clip": self.proj_clip,
                "projection_dim": self.projection_dim,
                "dim": self.lstm_dim,
            },
            "char_cnn": {
                "embedding": {"dim": self.char_dim},
                "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway,
                "n_characters": N_CHARACTERS,
                "max_characters_per_token": MAX_CHARS,
                "activation": self.activation,
            },
        }

    def build(
        self, stateful: bool = False, dropout: float = 0.0, random_fills: bool = True
    ) -> BidirectionalLM:
        """A biLM of this architecture with freshly initialised weights; ``random_fills=False``: every
        parameter zero instead, nothing drawn from torch's random stream (for weights loaded right after)."""
        if random_fills:
            return self._build(stateful, dropout)
        with _unfilled():
            bilm = self._build(stateful, dropout)
        with torch.no_grad():
            for param in bilm.parameters():
                param.zero_()  # unfilled memory is whatever was there before
        return bilm

    def _build(self, stateful: bool, dropout: float) -> BidirectionalLM:
        return BidirectionalLM(
            **{key: getattr(self, key) for key in SHAPE_KEYS}, stateful=stateful, dropout=dropout
        )

    @classmethod
    def from_model(cls, bilm: BidirectionalLM) -> BilmOptions:
        """The options that describe an existing biLM."""
        enc, lstm = bilm.token_encoder, bilm.lstm
        cell = lstm.forward_layers.at(0)
        return cls(
            char_dim=enc.char_cnn.char_embed.embedding_dim,
            filters=tuple((c.kernel_size[0], c.out_channels) for c in enc.char_cnn.convs),
            n_highway=len(enc.highway.layers),
            activation=cast(Any, enc.char_cnn.activation),
            lstm_dim=lstm.cell_size,
            projection_dim=lstm.projection_size,
            n_layers=lstm.n_layers,
            cell_clip=cell.cell_clip,
            proj_clip=cell.proj_clip,
            use_skip_connections=lstm.use_skip_connections,
        )

    def num_parameters(self) -> int:
        """Parameters of the biLM without the softmax, char padding row included (93,600,864 for the original)."""
        return sum(p.numel() for p in self.build().parameters())


def _bounded(source: str, options: BilmOptions) -> BilmOptions:
    """Every size within ``ner_app.limits`` before anything is allocated (an options file may be hostile)."""
    check_size(options.char_dim, "char_cnn.embedding.dim", source)
    check_size(len(options.filters), "char_cnn.filters (count)", source, high=MAX_LAYERS)
    for width, count in options.filters:
        check_size(width, "char_cnn.filters (width)", source, high=MAX_CHAR_WIDTH)
        check_size(count, "char_cnn.filters (count of a width)", source)
    check_size(sum(c for _, c in options.filters), "char_cnn.filters (total)", source)
    check_size(options.n_highway, "char_cnn.n_highway", source, low=0, high=MAX_LAYERS)
    check_size(options.lstm_dim, "lstm.dim", source)
    check_size(options.projection_dim, "lstm.projection_dim", source)
    check_size(options.n_layers, "lstm.n_layers", source, high=MAX_LAYERS)
    return options


def read_options(path: str | Path) -> BilmOptions:
    """Parse and validate an options.json."""
    path = Path(path)
    try:
        options = read_json(path, MAX_OPTIONS_BYTES, OptionsError, "a JSON options file")
    except OSError as err:
        raise OptionsError(f"{path}: cannot read options file: {err.strerror}") from None
    if not isinstance(options, dict):
        raise OptionsError(
            f"{path}: expected a JSON object with 'char_cnn' and 'lstm', found {type(options).__name__}"
        )
    return BilmOptions.from_dict(options, source=str(path))


def write_options(options: BilmOptions, path: str | Path) -> None:
    """Write options.json (the released files' layout), atomically."""
    write_text(path, json.dumps(options.to_dict(), indent=2) + "\n")


# torch.nn.init's fills that torch's own layers (Linear, Conv1d, Embedding, LSTM) call in reset_parameters
_INIT_FILLS = (
    "uniform_",
    "normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "xavier_uniform_",
    "zeros_",
    "ones_",
)


@contextmanager
def _unfilled() -> Iterator[None]:
    """Layers built without their random fills: 0.4 s of the original-size biLM's load, all of it overwritten
    by the weight file. (Building on the ``meta`` device would also skip them, but imports dynamo, the compiler, which
    costs more.) Not thread-safe: only ``build(random_fills=False)`` uses it."""
    saved = {name: getattr(torch.nn.init, name) for name in _INIT_FILLS}
    try:
        for name in _INIT_FILLS:
            setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for name, fill in saved.items():
            setattr(torch.nn.init, name, fill)
