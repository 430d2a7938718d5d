"""The corpus of a run: train, dev and test read once, with tags in the training scheme and as in the files."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ner_app.config.schema import DataConfig
from ner_app.errors import MissingFileError, NerAppError
from ner_app.limits import MAX_ENTITY_TYPES, MAX_TRAIN_SENTENCE_TOKENS
from ner_app.text.annotations.convert import Options, label_map, type_list
from ner_app.text.annotations.model import Audit
from ner_app.text.annotations.resolve import Policy
from ner_app.text.annotations.splits import (
    accepted_names,
    read_split,
    split_file,
    split_files,
    split_suffix,
)
from ner_app.text.conll import Sentence, require_annotated
from ner_app.text.tags import convert, detect_scheme, entity_types, normalize_scheme, scheme_tags, split_tag
from ner_app.train.hub import (
    EXAMPLE,
    check_hub_dataset,
    dataset_files,
    is_dataset_folder,
    load_folder_dataset,
    load_hub_dataset,
)

log = logging.getLogger("ner_app")
MANY_TYPES = 50  # CoNLL-2003 has 4 entity types, OntoNotes 18: far more suggests a wrong tag column
SPLITS = ("train", "dev", "test")  # the one name of each split; the dev file is valid.txt
EVALUATED = SPLITS[1:]  # the splits a run reports on (metrics.json, reports, predictions)
_FILE_SPLITS = {"train": "train", "dev": "valid", "test": "test"}  # split -> name of its file and loader key
# The end of every "no data" error: how an outside user gets CoNLL-2003 (whose text we cannot redistribute).
HOW_TO_GET = (
    "to get CoNLL-2003, set NER_SHARED or data.dir to a folder with train.txt, valid.txt and test.txt, "
    f"or use data.hub_name={EXAMPLE} (docs/data.md)"
)


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
    data_dir: str | None,
    hub_name: str | None,
    scheme: str,
    max_sentences: int | None = None,
    fmt: str | None = None,
    tag_column: int = -1,
    options: Options | None = None,
    known_types: Collection[str] = (),
) -> Corpus:
    """Read ``data_dir`` (CoNLL files ``train.txt``, ``valid.txt``, ``test.txt``, or a dataset folder in the
    hub's layout) or, when ``hub_name`` is set, a Hugging Face hub dataset; drop empty rows, keep the first
    ``max_sentences`` of each split (tiny runs) and convert the tags to ``scheme``. Every entity type of dev
    and test must occur in train or be one of ``known_types`` (those of the export a run continues). ``fmt`` is the files' format (None: detected), ``tag_column`` CoNLL's tag
    column (docs/data.md#your-own-annotations), ``options`` how span formats are converted (``reading_options``;
    its ``tag_column`` wins). Only train may hold ``-`` (not annotated) tags."""
    check_data_source(data_dir, hub_name, fmt)
    normalize_scheme(scheme)  # fail early on an unknown scheme
    scheme = scheme.upper()
    raw = (
        load_hub_dataset(hub_name, data_dir)
        if hub_name
        else load_folder(str(data_dir), fmt, tag_column, options)
    )
    source_scheme = detect_scheme(raw["train"]["tags"])
    splits = {}
    for name in SPLITS:
        col = raw[_FILE_SPLITS[name]]
        keep = [i for i, t in enumerate(col["tokens"]) if t]  # an empty row cannot be tagged
        keep = keep[:max_sentences] if max_sentences is not None else keep
        source_tags = [col["tags"][i] for i in keep]
        splits[name] = Split(
            tokens=[col["tokens"][i] for i in keep],
            tags=[convert(t, source_scheme, scheme) for t in source_tags],
            source_tags=source_tags,
            docs=[col["doc"][i] for i in keep],
        )
    longest = max(range(len(splits["train"])), key=lambda i: len(splits["train"].tokens[i]), default=None)
    if longest is not None and len(splits["train"].tokens[longest]) > MAX_TRAIN_SENTENCE_TOKENS:
        raise NerAppError(
            f"train sentence {longest + 1:,} (document {splits['train'].docs[longest]}) "
            f"has {len(splits['train'].tokens[longest]):,} tokens; training takes sentences of at most "
            f"{MAX_TRAIN_SENTENCE_TOKENS:,} (a sentence's activations are kept for the backward pass): split it"
        )
    types = set(entity_types(t for tags in splits["train"].tags for t in tags))
    for name in EVALUATED:
        unseen = {
            t
            for tags in splits[name].tags
            for t in tags
            if t != "O" and split_tag(t)[1] not in types and split_tag(t)[1] not in known_types
        }
        if unseen:
            shown = ", ".join(repr(t[:40]) for t in sorted(unseen)[:5]) + (", ..." if len(unseen) > 5 else "")
            raise NerAppError(f"{name} has tags whose entity types never occur in train: [{shown}]")
    tags = len(scheme_tags(scheme, types))
    if (
        len(types) > MAX_ENTITY_TYPES
    ):  # a CRF's work grows with the square of its tags: 10,000 types take minutes a batch
        examples = ", ".join(t[:20] for t in sorted(types)[:3])  # names from the data: bounded
        raise NerAppError(
            f"train has {len(types):,} entity types ({examples}, ...; {tags:,} tags), more than the {MAX_ENTITY_TYPES:,} "
            "a CRF tagger trains in reasonable time; is the last column of the files the NER tag?"
        )
    if len(types) > MANY_TYPES:
        log.warning(
            "train has %d entity types (%d tags, a %d x %d CRF): training will be slow; is the last "
            "column of the files the NER tag?",
            len(types),
            tags,
            tags,
            tags,
        )
    return Corpus(splits, scheme, source_scheme)


def check_data_source(data_dir: str | None, hub_name: str | None, fmt: str | None = None) -> None:
    """Refuse, without reading any data (and without torch), a run whose data cannot be found: no source, a
    folder without the split files or a dataset, a hub name that is malformed or that neither the hub nor the
    cache can serve now. ``train`` calls it before the heavy imports; the errors are ``load_corpus``'s."""
    if not data_dir and not hub_name:
        raise NerAppError(
            f"set data.dir (a folder with train.txt, valid.txt, test.txt) or data.hub_name; {HOW_TO_GET}"
        )
    if hub_name:
        check_hub_dataset(hub_name, data_dir)
        return
    folder = Path(str(data_dir))
    found = any(split_file(folder, name, fmt) for name in _FILE_SPLITS.values())
    if found or not folder.is_dir() or not is_dataset_folder(folder):
        for name in _FILE_SPLITS.values():
            _split_path(str(data_dir), name, fmt, HOW_TO_GET)


def _split_path(data_dir: str, name: str, fmt: str | None, how_to_get: str | None = None) -> Path:
    """The file (brat: folder) of split ``name`` of ``data_dir`` in format ``fmt`` (None: any), or
    ``MissingFileError`` naming what was expected."""
    found = split_file(Path(data_dir), name, fmt)
    if found is not None:
        return found
    if fmt not in (None, "conll"):
        missing = (
            f"{os.path.join(data_dir, name)}: no split file of data.format={fmt} (expected "
            f"{', '.join(f'{n}{split_suffix(fmt)}' for n in _FILE_SPLITS.values())} in data.dir)"
        )
    else:
        path = os.path.join(data_dir, f"{name}.txt")
        missing = (
            f"{path}: not found (data.dir must hold a train, a valid and a test file; {name}'s may be named "
            f"{accepted_names(name)}; ner-app split makes the three from one export)"
        )
    raise MissingFileError(f"{missing}; {how_to_get}" if how_to_get else missing)


def load_folder(
    data_dir: str, fmt: str | None = None, tag_column: int = -1, options: Options | None = None
) -> dict[str, dict[str, list[Any]]]:
    """The columns (``tokens``, ``tags`` as in the data, ``doc``) of the splits ``train``, ``valid`` and ``test``
    of a folder: CoNLL files, or a dataset folder (parquet files or ``save_to_disk``) in the hub's layout.
    A folder without either names the missing ``train.txt`` and says how to get CoNLL-2003."""
    folder = Path(data_dir)
    conll = any(split_file(folder, name, fmt) for name in _FILE_SPLITS.values())
    if not conll and folder.is_dir() and is_dataset_folder(folder):
        return load_folder_dataset(folder)
    try:
        splits = load_local_splits(data_dir, fmt, tag_column, options)
    except MissingFileError as err:
        raise MissingFileError(f"{err}; {HOW_TO_GET}") from None
    return {name: splits[name].to_dict() for name in _FILE_SPLITS.values()}


def data_files(data_dir: str, fmt: str | None = None) -> list[Path]:
    """The files whose bytes are the data of ``data_dir`` (for a run's data fingerprint): the split files in
    format ``fmt`` (None: any) that exist, else the files of a dataset folder."""
    folder = Path(data_dir)
    found = [
        p
        for name in _FILE_SPLITS.values()
        if (path := split_file(folder, name, fmt))
        for p in split_files(path)
        if p.is_file()  # a FIFO or device is not read here: loading the split names it in one line
    ]
    return found if found or not folder.is_dir() else dataset_files(folder)


def load_local_splits(
    data_dir: str, fmt: str | None = None, tag_column: int = -1, options: Options | None = None
) -> Any:
    """``train.txt``, ``valid.txt``, ``test.txt`` of ``data_dir`` (or the splits in another format,
    ``train.jsonl``, ...) as a ``datasets.DatasetDict`` with columns ``tokens``, ``tags`` (as in the files)
    and ``doc``."""
    import datasets

    out = {}
    for name, split_sentences in read_local_splits(data_dir, fmt, tag_column, options).items():
        columns = {"tokens": [s.tokens for s in split_sentences], "tags": [s.tags for s in split_sentences]}
        out[name] = datasets.Dataset.from_dict({**columns, "doc": [s.doc for s in split_sentences]})
    return datasets.DatasetDict(out)


def read_local_splits(
    data_dir: str,
    fmt: str | None = None,
    tag_column: int = -1,
    options: Options | None = None,
) -> dict[str, list[Sentence]]:
    """The sentences of the split files ``train``, ``valid`` and ``test`` of ``data_dir`` (``read_splits``)."""
    return read_splits(
        split_paths(data_dir, fmt), fmt, options or Options(Policy({}, None), tag_column=tag_column)
    )


def split_paths(data_dir: str, fmt: str | None) -> dict[str, Path]:
    """The file (brat: folder) of each split of ``data_dir``, by its file name (``train``, ``valid``, ``test``)."""
    return {name: _split_path(data_dir, name, fmt) for name in _FILE_SPLITS.values()}


def read_splits(
    paths: dict[str, Path],
    fmt: str | None,
    options: Options,
    audits: dict[str, Audit] | None = None,
    scored_known: bool = True,
) -> dict[str, list[Sentence]]:
    """The sentences of split files (``train``, ``valid``, ``test`` -> path); no torch, no datasets:
    ``check-data`` reads them too. Span formats are converted with ``options``; ``outside unknown`` applies
    to train only (dev and test are scored: every gold tag must be known, which ``scored_known`` checks),
    and then every split is tagged BIOES, so an entity's edges stay known beside unannotated text in any
    training scheme. The changed spans of each split go to ``audits[name]`` when given, else to the log."""
    if options.outside != "O":
        options = dataclasses.replace(options, scheme="BIOES")
    out = {}
    for name, path in paths.items():
        reading = options if name == "train" else dataclasses.replace(options, outside="O")
        audit = audits.setdefault(name, Audit()) if audits is not None else None
        sentences = read_split(path, fmt, options.tag_column, reading, audit)
        if name != "train" and scored_known:
            require_annotated(sentences, str(path))
        out[name] = sentences
    return out


def reading_options(
    tag_column: int = -1,
    align: str = "expand",
    overlap: str = "longest",
    labels: str | None = None,
    types: str | None = None,
    outside: str = "O",
    annotation: str = "first",
    keep_unannotated: bool = False,
) -> Options:
    """How split files are read, from the ``data.`` keys of the same names (``convert``'s options)."""
    policy = Policy(label_map(labels, "data.labels"), type_list(types, "data.types"), overlap)
    return Options(policy, align, "IOB2", tag_column, annotation, outside, keep_unannotated, "data.format")


def data_reading(data: DataConfig) -> Options:
    """``reading_options`` of a config's data section."""
    return reading_options(
        data.tag_column,
        data.align,
        data.overlap,
        data.labels,
        data.types,
        data.outside,
        data.annotation,
        data.keep_unannotated,
    )
