"""The Python API: ``ner_app.load_tagger`` and ``ner_app.load_bilm`` (docs/python_api.md).

Both default to what ships with the repository: the CoNLL-2003 tagger in ``data/models/conll2003`` and the
biLM in ``data/bilm``. The tagger runs the same code as ``predict`` (``serve/predictor.py``), so its entities
are the command's, and the embedder the same batches as ``embed`` (``serve/embed.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.weights import load_bilm as load_bilm_files
from ner_app.errors import MissingFileError
from ner_app.serve.embed import Precision, embed_sentences, inference_autocast
from ner_app.serve.predictor import Predictor
from ner_app.text.tags import entity_types
from ner_app.text.tokenizer import tokenize

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED_MODEL = REPOSITORY / "data" / "models" / "conll2003"
SHIPPED_BILM = REPOSITORY / "data" / "bilm"


def shipped(path: Path, what: str) -> Path:
    """A shipped folder, or one clear line when this installation lacks it (a wheel has no ``data/``)."""
    if not path.is_dir():
        raise MissingFileError(
            f"{path}: the shipped {what} is not in this installation (it comes with the repository's data/ "
            "folder: install from a clone with pip install -e ., or pass a path)"
        )
    return path


@dataclass(frozen=True)
class Entity:
    """A named entity found in a text: ``text == source[start:end]``; ``score`` is the mean probability of its
    tokens' predicted tags (from the CRF's marginals)."""

    start: int
    end: int
    type: str
    text: str
    score: float


class Tagger:
    """A trained tagger ready to tag raw text or tokenised sentences (``load_tagger`` makes one)."""

    def __init__(self, predictor: Predictor, path: Path) -> None:
        self.predictor, self.path = predictor, path

    @property
    def entity_types(self) -> list[str]:
        """The entity types the tagger knows, e.g. ``["LOC", "MISC", "ORG", "PER"]``."""
        return entity_types(self.predictor.tags.itos)

    def predict(self, texts: Iterable[str]) -> list[list[Entity]]:
        """The entities of each text, tagged in batches across texts (``predict_text`` for one text).

        Each text is tokenised like CoNLL-2003 and split into sentences; offsets index into the text. The
        results equal ``ner-app predict``'s JSON lines for the same lines.
        """
        if isinstance(texts, str):  # a string is an iterable of one-character texts: surely a mistake
            raise TypeError("predict takes a list of texts; use predict_text for one text")
        return [
            [Entity(**found) for found in result["entities"]]
            for result in self.predictor.predict_texts(texts)
        ]

    def predict_text(self, text: str) -> list[Entity]:
        """The entities of one text."""
        return self.predict([text])[0]

    def tag(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """Tags (in the scheme of the training files, IOB1 for CoNLL-2003) of tokenised sentences."""
        return [self.predictor.to_source(tags) for tags, _ in self.predictor.tag(sentences)]


def load_tagger(path: str | Path | None = None, device: str = "cpu", batch_size: int = 64) -> Tagger:
    """Load an export (``export`` command, or ``RUN/export`` of a training run); ``None``: the shipped
    CoNLL-2003 tagger. Nothing is unpickled; checksums, shapes and the biLM's fingerprint are verified."""
    folder = shipped(SHIPPED_MODEL, "CoNLL-2003 tagger") if path is None else Path(path)
    return Tagger(Predictor.from_export(folder, device=device, batch_size=batch_size), folder)


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
        self, sentences: Iterable[str | Sequence[str]], batch_size: int = 64, precision: Precision = "fp32"
    ) -> list[Embedding]:
        """One ``Embedding`` per sentence: a string is tokenised like ``predict`` (``embed --tokenize``), a
        list of strings is taken as its tokens. The arrays equal those ``embed`` writes."""
        tokens: list[list[str]] = []
        offsets: list[list[tuple[int, int]] | None] = []
        for sentence in sentences:
            if isinstance(sentence, str):
                found = tokenize(sentence)
                tokens.append([t.text for t in found])
                offsets.append([(t.start, t.end) for t in found])
            else:
                tokens.append(list(sentence))
                offsets.append(None)
        layers: list[np.ndarray | None] = [None] * len(tokens)
        with inference_autocast(self.device, precision):
            for index, array in embed_sentences(self.bilm, tokens, batch_size, self.device):
                layers[index] = array
        return [Embedding(t, a, o) for t, a, o in zip(tokens, layers, offsets, strict=True) if a is not None]


def load_bilm(path: str | Path | None = None, device: str = "cpu") -> Embedder:
    """Load a biLM folder (``options.json`` + ``weights.hdf5``: one written by ``pretrain-bilm`` or
    ``download-elmo``); ``None``: the shipped biLM in ``data/bilm``."""
    folder = shipped(SHIPPED_BILM, "biLM") if path is None else Path(path)
    return Embedder(load_bilm_files(*bilm_files(folder)), device)


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
