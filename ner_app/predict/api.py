"""The Python API: ``ner_app.load_tagger`` and ``ner_app.load_bilm`` (docs/python_api.md).

Both default to what ships with the repository: the CoNLL-2003 tagger in ``data/models/conll2003`` and the
biLM in ``data/bilm``. The tagger runs the same code as ``predict`` (``predict/predictor.py``), so its entities
are the command's, and the embedder the same batches as ``embed`` (``bilm/embed.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ner_app.errors import MissingFileError
from ner_app.predict.loading import AnyPredictor, load_predictor, model_kind
from ner_app.predict.shipped import SHIPPED_BILM, SHIPPED_MODEL, shipped
from ner_app.text.batching import EMBED_BATCH_SIZE, PREDICT_BATCH_SIZE
from ner_app.text.predictions import Entity, Flagged, TaggedLine
from ner_app.text.readings import ReadingOptions
from ner_app.text.reliability import note_uncalibrated
from ner_app.text.tags import entity_types
from ner_app.text.tokenizer import tokenize

if TYPE_CHECKING:  # torch is imported on first use: an ONNX folder's tagger runs without it
    from ner_app.bilm.bilm import BidirectionalLM
    from ner_app.bilm.embed import Precision

__all__ = ["Embedder", "Embedding", "Entity", "Flagged", "TaggedLine", "Tagger", "load_bilm", "load_tagger"]


# ---------------------------------------------------------------- arguments: wrong types fail here, by name
def _kind(value: Any) -> str:
    """What a value is, for messages: ``a string``, ``bytes``, ``int``."""
    if isinstance(value, str):
        return "a string"
    return "bytes" if isinstance(value, bytes | bytearray) else type(value).__name__


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an integer >= 1, found {_kind(value)} {value!r:.40}")
    if value < 1:
        raise ValueError(f"{name}: expected an integer >= 1, found {value}")
    return value


def _folder(path: Any, name: str = "path") -> Path | None:
    if path is not None and not isinstance(path, str | os.PathLike):
        raise TypeError(f"{name}: expected a folder path (str or pathlib.Path) or None, found {_kind(path)}")
    return None if path is None else Path(path)


def _device(device: Any, onnx: Path | None = None) -> str:
    """A device name torch sees here; ``onnx``: the ONNX folder being loaded, whose device is the CPU."""
    if not isinstance(device, str):
        raise TypeError(f"device: expected 'cpu' or 'cuda' (a string), found {_kind(device)}")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", device):
        raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', found {device!r:.40}")
    if device == "cpu":
        return device
    if onnx is not None:
        raise ValueError(
            f"device={device!r}: {onnx} is an ONNX folder, which runs on the CPU (onnxruntime); use 'cpu'"
        )
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: torch {torch.__version__} sees no CUDA device here; use 'cpu'")
    return device


def _items(values: Any, name: str, what: str) -> list[Any]:
    """``values`` as a list; a string (or bytes) is refused: it would be a list of one-character items."""
    if isinstance(values, str | bytes | bytearray) or not isinstance(values, Iterable):
        raise TypeError(f"{name}: expected a list of {what}, found {_kind(values)}")
    return list(values)


def _tokens(sentence: Any, name: str) -> list[str]:
    """A tokenised sentence: a list of token strings, each non-empty and without whitespace (as in CoNLL)."""
    if isinstance(sentence, str | bytes | bytearray) or not isinstance(sentence, Iterable):
        raise TypeError(f"{name}: expected a list of token strings, found {_kind(sentence)}")
    tokens = list(sentence)
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(f"{name}[{i}]: expected a token string, found {_kind(token)}")
        if not token or any(c.isspace() for c in token):  # CoNLL's tokens; ' ' would change every tag
            raise ValueError(
                f"{name}[{i}]: expected a token without whitespace, found {token!r:.40} (split it into tokens)"
            )
    return tokens


def _options(min_score: Any, alternatives: Any, flag_missed: Any) -> ReadingOptions:
    """The reading options of ``predict``: TypeError for a value of the wrong type, ValueError out of range."""
    for name, value, what in (
        ("min_score", min_score, "a probability in [0, 1]"),
        ("flag_missed", flag_missed, "a probability in [0, 1] or None"),
        ("alternatives", alternatives, "an integer >= 0"),
    ):
        number = int if name == "alternatives" else int | float
        if (value is not None or name != "flag_missed") and (
            isinstance(value, bool) or not isinstance(value, number)
        ):
            raise TypeError(f"{name}: expected {what}, found {_kind(value)} {value!r:.40}")
    return ReadingOptions(min_score, alternatives, flag_missed)


class Tagger:
    """A trained tagger ready to tag raw text or tokenised sentences (``load_tagger`` makes one)."""

    def __init__(self, predictor: AnyPredictor, path: Path) -> None:
        self.predictor, self.path = predictor, path

    @property
    def entity_types(self) -> list[str]:
        """The entity types the tagger knows, e.g. ``["LOC", "MISC", "ORG", "PER"]``."""
        return entity_types(self.predictor.tags.itos)

    def predict(
        self, texts: Iterable[str], min_score: float = 0.0, alternatives: int = 0
    ) -> list[list[Entity]]:
        """The entities of each text, tagged in batches across texts (``predict_text`` for one text).

        Each text is tokenised like CoNLL-2003 and split into sentences; offsets index into the text. An
        entity's ``score`` is the probability of that entity; ``min_score`` leaves out those below it and
        ``alternatives`` (K) gives each entity its K most probable overlapping other readings. The results
        equal ``ner-app predict``'s JSON lines for the same lines and options.
        """
        return [list(line.entities) for line in self.predict_lines(texts, min_score, alternatives)]

    def predict_lines(
        self,
        texts: Iterable[str],
        min_score: float = 0.0,
        alternatives: int = 0,
        flag_missed: float | None = None,
    ) -> list[TaggedLine]:
        """``predict`` with each text's ``TaggedLine``: its ``entities``, and with ``flag_missed`` (P) its
        ``flagged`` tokens (tagged O with a probability of O below P, each with its most probable reading)."""
        if isinstance(texts, str):  # a string is an iterable of one-character texts: surely a mistake
            raise TypeError(
                "texts: predict takes a list of texts, found a string; use predict_text for one text"
            )
        options = _options(min_score, alternatives, flag_missed)
        checked = _items(texts, "texts", "texts (strings)")
        for i, text in enumerate(checked):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}]: expected a string, found {_kind(text)}")
        return list(self.predictor.tag_lines(checked, options=options))

    def predict_text(self, text: str, min_score: float = 0.0, alternatives: int = 0) -> list[Entity]:
        """The entities of one text (``predict``'s options)."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected a string, found {_kind(text)}")
        return self.predict([text], min_score, alternatives)[0]

    def tag(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """Tags (in the scheme of the training files, IOB1 for CoNLL-2003) of tokenised sentences: a list of
        sentences, each a list of token strings (``[["Alice", "flew", "."]]``)."""
        what = "sentences, each a list of token strings"
        checked = [_tokens(s, f"sentences[{i}]") for i, s in enumerate(_items(sentences, "sentences", what))]
        return [self.predictor.to_source(tags) for tags, _ in self.predictor.tag(checked)]


def load_tagger(
    path: str | Path | None = None, device: str = "cpu", batch_size: int = PREDICT_BATCH_SIZE
) -> Tagger:
    """Load an export (``export`` command, or ``RUN/export`` of a training run) or an ONNX folder (``export
    --onnx``: tagged with onnxruntime, without torch); ``None``: the shipped CoNLL-2003 tagger. Nothing is
    unpickled; checksums, shapes and the biLM's fingerprint are verified."""
    given, batch_size = _folder(path), _positive_int(batch_size, "batch_size")
    folder = shipped(SHIPPED_MODEL, "CoNLL-2003 tagger") if given is None else given
    device = _device(device, folder if model_kind(folder) == "onnx" else None)
    predictor = load_predictor(folder, device, batch_size)
    note_uncalibrated(predictor.calibrated, str(folder))
    return Tagger(predictor, folder)


@dataclass(frozen=True)
class Embedding:
    """The biLM's layers for one sentence: ``layers`` (L+1, n_tokens, 2P) float32, sentence boundaries
    removed; ``offsets`` the tokens' character spans when the sentence was given as text."""

    tokens: list[str]
    layers: np.ndarray
    offsets: list[tuple[int, int]] | None = None


class Embedder:
    """A frozen biLM that embeds sentences (``load_bilm`` makes one); ``.bilm`` is the torch module."""

    def __init__(self, bilm: BidirectionalLM, device: str = "cpu") -> None:
        self.bilm, self.device = bilm.to(device).eval(), device

    def embed(
        self,
        sentences: Iterable[str | Sequence[str]],
        batch_size: int = EMBED_BATCH_SIZE,
        precision: Precision = "fp32",
    ) -> list[Embedding]:
        from ner_app.bilm.embed import embed_sentences, inference_autocast

        """One ``Embedding`` per sentence: a string is tokenised like ``predict`` (``embed --tokenize``), a
        list of strings is taken as its tokens. The arrays equal those ``embed`` writes."""
        given = _items(sentences, "sentences", "sentences (strings or lists of token strings)")
        batch_size = _positive_int(batch_size, "batch_size")
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision: expected 'fp32' or 'bf16', found {precision!r:.40}")
        tokens: list[list[str]] = []
        offsets: list[list[tuple[int, int]] | None] = []
        for i, sentence in enumerate(given):
            if isinstance(sentence, str):
                found = tokenize(sentence)
                tokens.append([t.text for t in found])
                offsets.append([(t.start, t.end) for t in found])
            else:
                tokens.append(_tokens(sentence, f"sentences[{i}]"))
                offsets.append(None)
        layers: list[np.ndarray | None] = [None] * len(tokens)
        with inference_autocast(self.device, precision):
            for index, array in embed_sentences(self.bilm, tokens, batch_size, self.device):
                layers[index] = array
        return [Embedding(t, a, o) for t, a, o in zip(tokens, layers, offsets, strict=True) if a is not None]


def load_bilm(path: str | Path | None = None, device: str = "cpu") -> Embedder:
    """Load a biLM folder (``options.json`` + ``weights.hdf5``: one written by ``pretrain-bilm`` or
    ``download-elmo``); ``None``: the shipped biLM in ``data/bilm``."""
    from ner_app.bilm.weights import load_bilm as load_bilm_files

    given, device = _folder(path), _device(device)
    folder = shipped(SHIPPED_BILM, "biLM") if given is None else given
    return Embedder(load_bilm_files(*bilm_files(folder), random_fills=False), device)


def bilm_files(folder: Path) -> tuple[Path, Path]:
    """(options, weights) of a biLM folder: ``options.json`` + ``weights.hdf5``, or the one ``*options.json``
    and the one ``*.hdf5`` that ``download-elmo`` writes."""
    if not folder.is_dir():
        raise MissingFileError(
            f"{folder}: not a folder (expected a biLM folder with options.json and weights.hdf5)"
        )
    found = []
    for name, pattern in (("options.json", "*options.json"), ("weights.hdf5", "*.hdf5")):
        candidates = [folder / name] if (folder / name).is_file() else sorted(folder.glob(pattern))
        if len(candidates) != 1:
            raise MissingFileError(
                f"{folder}: expected one {name} (or one {pattern}) in a biLM folder, found {len(candidates)}"
            )
        found.append(candidates[0])
    return found[0], found[1]
