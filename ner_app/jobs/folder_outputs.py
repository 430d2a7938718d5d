"""Where ``predict --input FOLDER --output OUTDIR`` writes, and what it records there.

Each input gets one output under OUTDIR at its relative path plus its format's usual extension
(``a/b.txt`` -> ``OUTDIR/a/b.txt.jsonl``; brat: a folder ``a/b.txt.brat/``), so no two inputs share an output
and an output never looks like an input. Each output appears by an atomic rename, so an output that is there is
complete.

``OUTDIR/.ner-app-predict.json`` (the manifest, written before the first output) records what the outputs were
tagged with: the model (its name and weights' sha256, ``tagger/version.py``), the format and the reading
options. A run into a folder whose manifest says otherwise stops in one line, unless ``--overwrite``; then every
file is tagged again and the manifest rewritten first. An output counts as done when it is at least as recent as
the manifest, so an output of the earlier model is never taken as done, even after an interrupted
``--overwrite`` run.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError
from ner_app.files import atomic_folder, write_text
from ner_app.records import read_json

MANIFEST = ".ner-app-predict.json"
_MANIFEST_MAX = 1 << 16  # bytes: a manifest is under 1 KB
# The usual extension of each --format's file (brat's is a folder): what the tool's import expects.
EXTENSIONS = {
    "jsonl": ".jsonl",
    "conll": ".conll",
    "html": ".html",
    "doccano": ".jsonl",
    "labelstudio": ".json",
    "prodigy": ".jsonl",
    "brat": ".brat",
}


def output_name(relative: str, fmt: str) -> str:
    """The output's path under OUTDIR of the input at ``relative``."""
    return relative + EXTENSIONS[fmt]


@dataclass(frozen=True)
class Identity:
    """What the outputs of a folder are tagged with: the model and every option that changes them."""

    model: str  # model_version: the export's name and a short hash of its weights
    weights_sha256: str | None  # the full hash, when the export records one
    format: str
    min_score: float
    alternatives: int
    flag_missed: float | None

    def differences(self, recorded: dict[str, Any]) -> list[str]:
        """What ``recorded`` (a manifest) says otherwise, as ``key: there -> now``. The weights' hash decides
        when both have one: the same weights in a folder named otherwise are the same model."""
        mine = asdict(self)
        keys = [k for k in mine if k not in ("model", "weights_sha256")]
        if self.weights_sha256 and recorded.get("weights_sha256"):
            keys.insert(0, "weights_sha256")
        else:
            keys.insert(0, "model")
        return [
            f"{_NAMES.get(k, k)} {_shown(recorded.get(k))} there, {_shown(mine[k])} now"
            for k in keys
            if recorded.get(k) != mine[k]
        ]


_NAMES = {
    "weights_sha256": "model weights",
    "format": "--format",
    "min_score": "--min-score",
    "alternatives": "--alternatives",
    "flag_missed": "--flag-missed",
}


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    return value[:12] if isinstance(value, str) and len(value) == 64 else str(value)


def _read_manifest(folder: Path, option: str) -> dict[str, Any] | None:
    path = folder / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = read_json(path, _MANIFEST_MAX)
    except (NerAppError, OSError):
        data = None
    if not isinstance(data, dict) or data.get("written_by") != "ner_app predict" or path.is_symlink():
        raise NerAppError(
            f"{option}: {MANIFEST} is not a manifest predict wrote; nothing was changed: choose another output "
            "folder, or add --overwrite to tag every file again"
        )
    return data


def claim_outputs(folder: Path, identity: Identity, overwrite: bool, option: str) -> bool:
    """Before any work: whether ``folder`` may take these outputs, and whether earlier ones count as done
    (True: same model and options; False: a new folder, or --overwrite). One line when it holds something
    else: a file, another model's or options' outputs, or files predict did not write."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise NerAppError(
            f"{option}: exists and is not a folder; a folder input writes a folder of outputs (or, with --format "
            "jsonl, one file named *.jsonl)"
        )
    if not folder.exists():
        return False
    recorded = _read_manifest(folder, option) if not overwrite else None
    if recorded is None:
        entries = sorted(p.name for p in folder.iterdir())
        if entries and not overwrite:
            raise NerAppError(
                f"{option}: exists and is not an output folder of predict (it holds {', '.join(entries[:4])}); "
                "nothing was changed: choose another output folder, or add --overwrite to write into it"
            )
        return False
    changed = identity.differences(recorded)
    if changed:
        raise NerAppError(
            f"{option}: holds outputs of another model or other options ({'; '.join(changed)}); nothing was "
            "changed: choose another output folder, or add --overwrite to tag every file again"
        )
    return True


def write_manifest(folder: Path, identity: Identity) -> None:
    """The manifest, unless the folder's already says the same (a re-run, another shard): a rewrite would make
    the outputs written so far look older than it."""
    path = folder / MANIFEST
    try:
        if (
            path.is_file()
            and not path.is_symlink()
            and not identity.differences(read_json(path, _MANIFEST_MAX))
        ):
            return
    except (NerAppError, OSError, AttributeError):
        pass  # unreadable: written anew
    record = {"written_by": "ner_app predict", **asdict(identity)}
    write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def done(folder: Path, name: str) -> bool:
    """Whether the output ``name`` is there, complete (every output appears by an atomic rename) and written
    under the manifest now in the folder (not older than it)."""
    try:
        since = os.stat(folder / MANIFEST).st_mtime_ns
        return os.stat(folder / name).st_mtime_ns >= since
    except OSError:
        return False


class Writer:
    """Outputs written in order by one thread while the next file is tagged: each atomic write waits for its
    fsync, on the disk, not the CPU (about a third of a small file's time). At most ``AHEAD`` outputs wait; an
    error in a write is raised in the caller at its next ``submit`` or at the end. On a stop the write under
    way finishes (whole, by its rename) and those waiting are dropped: a re-run tags them."""

    AHEAD = 8

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="predict-writer")
        self._pending: deque[Future[None]] = deque()

    def submit(self, function: Callable[..., None], *args: Any) -> None:
        while self._pending and (self._pending[0].done() or len(self._pending) >= self.AHEAD):
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(function, *args))

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        try:
            if kind is None:
                while self._pending:
                    self._pending.popleft().result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


def write_one(folder: Path, name: str, rendered: str | list[tuple[str, str]]) -> None:
    """One output: a file format's text, or a folder format's files (brat), each appearing whole."""
    if isinstance(rendered, str):
        write_text(folder / name, rendered)
        return
    with atomic_folder(folder / name) as tmp:
        for file, text in rendered:
            (tmp / file).write_text(text, encoding="utf-8")
