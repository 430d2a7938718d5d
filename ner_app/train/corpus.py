"""The corpus of a run: train, dev and test read once, with tags in the training scheme and as in the files."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from ner_app.errors import MissingFileError, NerAppError
from ner_app.text.conll import read_conll
from ner_app.text.tags import convert, detect_scheme, is_tag, normalize_scheme, split_tag

log = logging.getLogger("ner_app")
MANY_TYPES = 50  # CoNLL-2003 has 4 entity types, OntoNotes 18: far more suggests a wrong tag column
SPLITS = ("train", "dev", "test")  # the one name of each split; the dev file is valid.txt
EVALUATED = SPLITS[1:]  # the splits a run reports on (metrics.json, reports, predictions)
_FILE_SPLITS = {"train": "train", "dev": "valid", "test": "test"}  # split -> name of its file and loader key


@dataclass(frozen=True)
class Split:
    """One split: tokens, tags in the training scheme, the original tags and document indices."""

    tokens: list[list[str]]
    tags: list[list[str]]
    source_tags: list[list[str]]
    docs: list[int]

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class Corpus:
    """The three splits; ``source_scheme`` is the scheme of the files (detected on train), ``scheme`` the
    training scheme the ``tags`` of every split are in."""

    splits: dict[str, Split]
    scheme: str
    source_scheme: str


def load_corpus(
    data_dir: str | None, hub_name: str | None, scheme: str, max_sentences: int | None = None
) -> Corpus:
    """Read a folder (``train.txt``, ``valid.txt``, ``test.txt``) or, when ``hub_name`` is set, a Hugging Face
    hub dataset; drop empty rows, keep the first ``max_sentences`` of each split (tiny runs) and convert the
    tags to ``scheme``. Every entity type of dev and test must occur in train."""
    if not data_dir and not hub_name:
        raise NerAppError("set data.dir (a folder with train.txt, valid.txt, test.txt) or data.hub_name")
    normalize_scheme(scheme)  # fail early on an unknown scheme
    scheme = scheme.upper()
    datasets = load_hub_splits(hub_name) if hub_name else load_local_splits(str(data_dir))
    raw = {name: datasets[_FILE_SPLITS[name]].to_dict() for name in SPLITS}
    source_scheme = detect_scheme(raw["train"]["tags"])
    splits = {}
    for name, col in raw.items():
        keep = [i for i, t in enumerate(col["tokens"]) if t]  # an empty row cannot be tagged
        keep = keep[:max_sentences] if max_sentences is not None else keep
        source_tags = [col["tags"][i] for i in keep]
        splits[name] = Split(
            tokens=[col["tokens"][i] for i in keep],
            tags=[convert(t, source_scheme, scheme) for t in source_tags],
            source_tags=source_tags,
            docs=[col["doc"][i] for i in keep],
        )
    types = {split_tag(t)[1] for tags in splits["train"].tags for t in tags if t != "O"}
    for name in EVALUATED:
        unseen = {t for tags in splits[name].tags for t in tags if t != "O" and split_tag(t)[1] not in types}
        if unseen:
            raise NerAppError(f"{name} has tags whose entity types never occur in train: {sorted(unseen)}")
    if (
        len(types) > MANY_TYPES
    ):  # a CRF's work grows with the square of its tags: 10,000 types take minutes a batch
        tags = 1 + len(types) * (4 if scheme == "BIOES" else 2)
        log.warning("train has %d entity types (%d tags, a %d x %d CRF): training will be slow; is the last "
                    "column of the files the NER tag?", len(types), tags, tags, tags)  # fmt: skip
    return Corpus(splits, scheme, source_scheme)


def load_local_splits(data_dir: str) -> Any:
    """``train.txt``, ``valid.txt``, ``test.txt`` of ``data_dir`` as a ``datasets.DatasetDict`` with columns
    ``tokens``, ``tags`` (as in the files) and ``doc``."""
    import datasets

    out = {}
    for name in _FILE_SPLITS.values():
        path = os.path.join(data_dir, f"{name}.txt")
        if not os.path.isfile(path):
            raise MissingFileError(
                f"{path}: not found (data.dir must hold train.txt, valid.txt and test.txt in CoNLL format)"
            )
        sentences = read_conll(path)
        columns = {"tokens": [s.tokens for s in sentences], "tags": [s.tags for s in sentences]}
        out[name] = datasets.Dataset.from_dict({**columns, "doc": [s.doc for s in sentences]})
    return datasets.DatasetDict(out)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").upper() in {"1", "ON", "YES", "TRUE"}


def load_hub_splits(hub_name: str) -> Any:
    """A hub dataset (conll2003: ``tokens`` and ClassLabel ``ner_tags``) as a ``datasets.DatasetDict`` like
    ``load_local_splits`` (tags as strings, ``doc`` 0) with splits train, valid and test."""
    import datasets
    import datasets.config

    previous = datasets.config.HF_HUB_OFFLINE
    # `datasets` reads HF_DATASETS_OFFLINE when it is imported; honour it when it was set later
    if _env_true("HF_DATASETS_OFFLINE") or _env_true("HF_HUB_OFFLINE"):
        datasets.config.HF_HUB_OFFLINE = True
    try:
        loaded = datasets.load_dataset(hub_name)
    except OSError as err:  # ConnectionError (OfflineModeIsEnabled, DNS failure), not cached, not found
        raise MissingFileError(
            f"could not download dataset '{hub_name}' (offline?): "
            "set data.dir to a folder with train.txt, valid.txt, test.txt in CoNLL format"
        ) from err
    finally:
        datasets.config.HF_HUB_OFFLINE = previous

    aliases = {"train": "train", "validation": "valid", "valid": "valid", "dev": "valid", "test": "test"}
    out = {}
    for key, ds in loaded.items():
        column = "ner_tags" if "ner_tags" in ds.column_names else "tags"
        if key not in aliases or not {"tokens", column} <= set(ds.column_names):
            continue
        tags = ds[column][:]
        names = getattr(getattr(ds.features[column], "feature", None), "names", None)
        if names is not None:  # ClassLabel ids -> tag strings
            tags = [[names[i] for i in row] for row in tags]
        for row, sentence_tags in enumerate(tags):  # read_conll checks local files; check these too
            for tag in sentence_tags:
                if not is_tag(tag):
                    raise NerAppError(f"dataset '{hub_name}' split {key} row {row}: invalid tag {tag!r}")
        columns = {"tokens": ds["tokens"][:], "tags": tags, "doc": [0] * len(ds)}
        out[aliases[key]] = datasets.Dataset.from_dict(columns)
    missing = [name for name in _FILE_SPLITS.values() if name not in out]
    if missing:
        raise MissingFileError(
            f"dataset '{hub_name}' has no {'/'.join(missing)} split with 'tokens' and 'ner_tags' (or 'tags')"
        )
    return datasets.DatasetDict(out)
