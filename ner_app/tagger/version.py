"""The name an export's predictions carry into the tools that keep one (Label Studio's ``model_version``): the
model's folder and a short hash of its weights, ``conll2003-3f9a2c1d``, so predictions of two models (or of one
model before and after more training) are told apart. No torch here: ``predict --workers`` names the model in
the main process, which never loads it.

The hash is the ``weights_sha256`` that ``tagger.json`` records at export (``tagger/integrity.py``), never the
weights hashed again: the export writes that record as its last key, so the file's last bytes hold it; an
export laid out otherwise is read whole (bounded).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ner_app.records import read_json

SHORT = 8  # hex digits of the weights' sha256 in the name: one clash in ~4e9 pairs of models
TAIL_BYTES = 1024  # the integrity record with its three sha256 is under 300 bytes
MAX_SPEC_BYTES = (
    1 << 29
)  # tagger.json read whole (vocabularies of up to MAX_VOCAB entries), as export reads it
_MANIFEST_SUM = re.compile(r'"manifest_sha256"\s*:\s*"([0-9a-f]{64})"\s*\}\s*$')
_RECORD = re.compile(r'"integrity"\s*:\s*(\{[^{}]*\})\s*\}\s*$')


def recorded_weights_sha256(spec_path: Path) -> str | None:
    """The ``weights_sha256`` recorded in ``tagger.json``; None when it records none."""
    with open(spec_path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - TAIL_BYTES))
        tail = f.read().decode("utf-8", errors="replace")
    found = _RECORD.search(tail)
    record = json.loads(found.group(1)) if found else None
    if not isinstance(record, dict):  # not last, or not compact: the whole file, as export reads it
        data = read_json(spec_path, MAX_SPEC_BYTES)
        record = data.get("integrity") if isinstance(data, dict) else None
    digest = record.get("weights_sha256") if isinstance(record, dict) else None
    return digest if isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest) else None


def model_name(export: Path) -> str:
    """The export's folder name, or the run's for a run's ``export/`` folder."""
    folder = export.resolve()
    return folder.parent.name if folder.name == "export" and folder.parent.name else folder.name


def recorded_manifest_sha256(manifest_path: Path) -> str | None:
    """The ``manifest_sha256`` an ONNX folder's ``onnx.json`` ends with (the exporter writes it last; it
    covers every graph's sha256); None when it is not there."""
    with open(manifest_path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - TAIL_BYTES))
        tail = f.read().decode("utf-8", errors="replace")
    found = _MANIFEST_SUM.search(tail)
    return found.group(1) if found else None


def model_version(export: Path, name: str | None = None) -> str:
    """``NAME-HASH``: ``name`` (default ``model_name``) and the first ``SHORT`` hex digits of the export's
    weights' sha256 (an ONNX folder's: its manifest's, which holds its graphs'); the name alone when no digest
    is recorded."""
    name = model_name(export) if name is None else name
    folder = export.resolve()
    if not (folder / "tagger.json").is_file() and (folder / "onnx.json").is_file():
        digest = recorded_manifest_sha256(folder / "onnx.json")
    else:
        digest = recorded_weights_sha256(folder / "tagger.json")
    return f"{name}-{digest[:SHORT]}" if digest else name
