"""Datasets in the Hugging Face hub's layout (``tokens`` and ``ner_tags`` columns, train/validation/test splits):
from the hub by name, or from a local folder of parquet files or a ``save_to_disk`` copy.

Every route ends in the columns the CoNLL reader gives (``tokens``, ``tags`` as strings, ``doc``), so the
corpus code after it is the same for files and datasets. A hub name is probed once, without retries, before
``datasets`` downloads anything: offline, or with a wrong name, the run stops in one line instead of
``huggingface_hub``'s retry loop (docs/data.md).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError
from ner_app.text.conll import DOCSTART
from ner_app.text.tags import is_tag

# The script-free CoNLL-2003 on the hub (parquet, IOB2 tags as ClassLabel names).
EXAMPLE = "lhoestq/conll2003"
PROBE_TIMEOUT_S = 5.0  # one request to the hub's API before any download; a live hub answers far sooner
# What a hub repository id looks like: NAME or OWNER/NAME (the hub allows letters, digits, '-', '_', '.').
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
# Split names a dataset may use -> the corpus's split files (train.txt, valid.txt, test.txt).
SPLIT_NAMES = {"train": "train", "validation": "valid", "valid": "valid", "dev": "valid", "test": "test"}
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
TRUE = {"1", "ON", "YES", "TRUE"}  # the values `datasets` and `huggingface_hub` take as true
COLUMNS = "columns 'tokens' and 'ner_tags' (tag names as ClassLabel or strings)"
FIX = "set data.dir to a folder with train.txt, valid.txt, test.txt or a saved copy of the dataset (docs/data.md)"


class DatasetError(NerAppError):
    """A dataset that cannot be loaded or lacks what training needs; the message names it and what to do."""


def is_dataset_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a dataset ``datasets`` wrote: ``save_to_disk`` files or parquet files (in it or
    up to two folders below, as in a hub snapshot: ``data/train-00000-of-00001.parquet``)."""
    if (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file():
        return True
    return any(next(folder.glob(pattern), None) for pattern in ("*.parquet", "*/*.parquet", "*/*/*.parquet"))


def dataset_files(folder: Path) -> list[Path]:
    """The data files of a dataset folder (parquet, or the Arrow files of ``save_to_disk``), sorted."""
    patterns = [f"{'*/' * depth}*.{ext}" for ext in ("parquet", "arrow") for depth in range(3)]
    return sorted({p for pattern in patterns for p in folder.glob(pattern) if p.is_file()})


def load_folder_dataset(folder: Path) -> dict[str, dict[str, list[Any]]]:
    """A local dataset folder (``save_to_disk``, or parquet files named by split) as corpus columns."""
    import datasets
    from datasets.exceptions import DatasetsError

    where = f"dataset folder {folder}"
    try:
        if (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file():
            loaded = datasets.load_from_disk(str(folder))  # memory-mapped Arrow files, nothing is written
        else:  # parquet: `datasets` infers the splits from the file names and converts them once into its cache
            check_parquet_files(folder)
            loaded = datasets.load_dataset(str(folder))
    except (OSError, ValueError, DatasetsError) as err:  # unreadable files: pyarrow's errors are ValueErrors
        raise DatasetError(f"{where}: cannot be read by `datasets` ({_first_line(err)})") from None
    return dataset_columns(loaded, where)


def check_parquet_files(folder: Path) -> None:
    """Every parquet file of ``folder`` is one with rows: `datasets` says only "An error occurred while
    generating the dataset" of an empty file, and "Instruction 'test' corresponds to no data" of one
    without rows."""
    import pyarrow.parquet as pq

    for file in dataset_files(folder):
        if file.suffix != ".parquet":
            continue
        if file.stat().st_size == 0:
            raise DatasetError(f"{file}: empty (0 bytes), expected a parquet file with {COLUMNS}")
        try:
            rows = pq.read_metadata(file).num_rows
        except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
            raise DatasetError(f"{file}: not a parquet file ({_first_line(err)})") from None
        if rows == 0:
            raise DatasetError(
                f"{file}: a parquet file without rows; every split needs sentences with {COLUMNS}"
            )


def load_hub_dataset(name: str, data_dir: str | None = None) -> dict[str, dict[str, list[Any]]]:
    """The hub dataset ``name`` (cached by ``datasets`` after the first download) as corpus columns.

    Offline (``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``) or when the hub cannot be reached, only the cache is
    read; a dataset that is not there, a name the hub does not know and a script-based dataset (which
    ``datasets`` >= 4 cannot run) are each one ``DatasetError``. ``data_dir``: the data.dir that the hub name
    takes precedence over, named in the advice.
    """
    fix = _fix(data_dir)
    import datasets
    import datasets.config
    from datasets.exceptions import DatasetsError

    _check_name(name)
    endpoint = str(datasets.config.HF_ENDPOINT).rstrip("/")
    offline = _offline()
    unreachable = offline or _probe(name, endpoint)
    previous = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = previous or unreachable is not None  # the cache only, no retry loop
    try:
        loaded = datasets.load_dataset(name)
    except (OSError, DatasetsError) as err:  # ConnectionError (offline, not cached), HTTP errors, bad files
        if unreachable is None:
            raise DatasetError(
                f"could not load dataset '{name}' from {endpoint} ({_first_line(err)}); {fix}"
            ) from None
        raise _not_cached(name, unreachable, fix) from None
    finally:
        datasets.config.HF_HUB_OFFLINE = previous
    return dataset_columns(loaded, f"dataset '{name}'")


def _fix(data_dir: str | None) -> str:
    """The advice of a hub error: how to get the data, or, with a data.dir set too, to use it."""
    if not data_dir:
        return FIX
    return f"set data.hub_name=null to train on data.dir ({data_dir}), which data.hub_name overrides"


def check_hub_dataset(name: str, data_dir: str | None = None) -> None:
    """Before torch is imported: ``load_hub_dataset``'s refusals that need no download (a malformed name; a
    name the hub does not know, gated or script-based; a hub that cannot be used now and a cache without the
    dataset), each the same one line. Imports ``datasets`` (a second or two), never torch."""
    _check_name(name)
    import datasets.config

    unreachable = _offline() or _probe(name, str(datasets.config.HF_ENDPOINT).rstrip("/"))
    if unreachable is None:
        return
    from datasets.load import dataset_module_factory

    previous = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = True  # what load_hub_dataset reads then: the cache only
    try:
        dataset_module_factory(name)  # finds the cached copy's files, reads no data
    except Exception:  # anything that is not a cached copy: load_hub_dataset would fail the same way
        raise _not_cached(name, unreachable, _fix(data_dir)) from None
    finally:
        datasets.config.HF_HUB_OFFLINE = previous


def _check_name(name: str) -> None:
    if not HUB_NAME.fullmatch(name) or os.path.isdir(name):
        raise DatasetError(
            f"data.hub_name {name!r} is not a hub name (NAME or OWNER/NAME, e.g. {EXAMPLE}); "
            "give a local dataset folder as data.dir"
        )


def _offline() -> str | None:
    """Why the hub is not to be asked (an offline variable, or ``datasets``' offline mode), or None."""
    import datasets.config

    # `datasets` reads these variables when it is imported; honour them when they were set later too
    offline = [f"{v}={os.environ[v]}" for v in OFFLINE_VARIABLES if os.environ.get(v, "").upper() in TRUE]
    if datasets.config.HF_HUB_OFFLINE and not offline:
        offline = ["offline mode is on"]
    return offline[0] if offline else None


def _not_cached(name: str, unreachable: str, fix: str = FIX) -> DatasetError:
    import datasets.config

    cache = datasets.config.HF_DATASETS_CACHE
    return DatasetError(
        f"dataset '{name}' is not in the datasets cache ({cache}) and the hub cannot be used ({unreachable}): "
        f"run once with network access, or {fix}"
    )


@functools.cache  # the early check and the load ask the hub once
def _probe(name: str, endpoint: str) -> str | None:
    """None when the hub has dataset ``name`` and ``datasets`` can load it; why the hub cannot be used when it
    cannot be reached (then the cache may still have it). A missing, gated or script-based dataset raises."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError

    page = f"{endpoint}/datasets/{name}"
    try:
        info = HfApi(endpoint=endpoint).dataset_info(name, timeout=PROBE_TIMEOUT_S)  # one request, no retries
    except GatedRepoError:
        raise DatasetError(
            f"dataset '{name}' is gated: accept its terms at {page} and log in (hf auth login)"
        ) from None
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else None
        if status in (401, 403, 404):  # the hub answers 401 for a name it does not know
            raise DatasetError(
                f"dataset '{name}' not found on {endpoint} (HTTP {status}): check data.hub_name "
                f"(e.g. data.hub_name={EXAMPLE}); a private dataset needs hf auth login"
            ) from None
        return f"{endpoint} answered HTTP {status}"
    # The transport's errors (httpx, requests) differ between huggingface_hub versions: any other failure
    # means the hub cannot be used now, and the cache may still serve.
    except Exception as err:
        return f"cannot reach {endpoint}: {type(err).__name__}: {_first_line(err)}"
    script = f"{name.split('/')[-1]}.py"
    if any(s.rfilename == script for s in info.siblings or ()):
        raise DatasetError(
            f"dataset '{name}' is script-based ({script}), which datasets >= 4 cannot load; "
            f"use a parquet copy such as data.hub_name={EXAMPLE}"
        )
    return None


def dataset_columns(loaded: Any, where: str) -> dict[str, dict[str, list[Any]]]:
    """Corpus columns (``tokens``, ``tags`` as strings, ``doc``) of the train, valid and test splits of a
    ``DatasetDict``. A row that is exactly ``-DOCSTART-`` starts a document, as in CoNLL files."""
    if not hasattr(loaded, "keys"):
        raise DatasetError(
            f"{where}: holds one split, expected train, validation and test (save a DatasetDict with save_to_disk)"
        )
    found: dict[str, str] = {}
    for key in loaded:
        if key in SPLIT_NAMES:
            found.setdefault(SPLIT_NAMES[key], key)
    missing = [name for name in ("train", "valid", "test") if name not in found]
    if missing:
        raise DatasetError(
            f"{where}: no {' or '.join('validation (or valid, dev)' if m == 'valid' else m for m in missing)} split "
            f"(found: {', '.join(loaded) or 'none'}); expected train, validation and test with {COLUMNS}"
        )
    return {name: _split_columns(loaded[key], f"{where} split {key}") for name, key in found.items()}


def _split_columns(ds: Any, where: str) -> dict[str, list[Any]]:
    column = "ner_tags" if "ner_tags" in ds.column_names else "tags"
    if not {"tokens", column} <= set(ds.column_names):
        raise DatasetError(f"{where}: expected {COLUMNS}, found columns {', '.join(ds.column_names)}")
    token_feature = getattr(ds.features["tokens"], "feature", None)
    if getattr(token_feature, "dtype", None) not in ("string", "large_string"):
        raise DatasetError(
            f"{where}: column 'tokens' holds {token_feature or ds.features['tokens']}, expected lists of token "
            "strings"
        )
    feature = getattr(ds.features[column], "feature", None)  # the feature of each list element
    names: list[str] | None = getattr(feature, "names", None)  # ClassLabel
    if names is None and getattr(feature, "dtype", None) != "string":
        raise DatasetError(
            f"{where}: column '{column}' holds {feature or ds.features[column]}, expected lists of tag names "
            "(ClassLabel or strings): numbers without ClassLabel names cannot be read as tags"
        )
    for bad in (n for n in names or () if not is_tag(n)):
        raise DatasetError(
            f"{where}: column '{column}' has the label {bad!r}, expected O, B-X, I-X, E-X or S-X"
        )
    rows = ds.select_columns(["tokens", column]).to_dict()
    out: dict[str, list[Any]] = {"tokens": [], "tags": [], "doc": []}
    doc = -1  # as read_conll: 0 at the first -DOCSTART- or at the first sentence when there is none
    for row, (tokens, tags) in enumerate(zip(rows["tokens"], rows[column], strict=True)):
        tokens, tags = tokens or [], tags or []
        if tokens == [DOCSTART]:
            doc += 1
            continue
        if not tokens and not tags:  # an empty row cannot be tagged
            continue
        if len(tokens) != len(tags):
            raise DatasetError(
                f"{where} row {row}: expected as many tags as tokens, found {len(tokens)} tokens and {len(tags)} tags"
            )
        for i, token in enumerate(tokens):
            if not (isinstance(token, str) and token):
                raise DatasetError(
                    f"{where} row {row}: token {i} is {token!r:.40}, expected a non-empty string"
                )
        if names is not None:
            for i in tags:  # -1 is ClassLabel's "no label"
                if not (isinstance(i, int) and 0 <= i < len(names)):
                    raise DatasetError(
                        f"{where} row {row}: expected label numbers 0 to {len(names) - 1}, found {i}"
                    )
            tags = [names[i] for i in tags]
        for tag in tags:
            if not (isinstance(tag, str) and is_tag(tag)):  # read_conll checks the tags of files; these too
                raise DatasetError(
                    f"{where} row {row}: invalid tag {tag!r}, expected O, B-X, I-X, E-X or S-X"
                )
        doc = max(doc, 0)
        out["tokens"].append(tokens)
        out["tags"].append(tags)
        out["doc"].append(doc)
    return out


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
