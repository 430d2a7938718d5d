"""What ties an export's files together and what is checked before its tensors reach a model.

``tagger.json`` records the sha256 of ``model.safetensors`` and of its own vocabularies (written at export,
verified on load), so a swapped tag or word entry, a flipped byte or a file from another export is refused.
Every tensor must then have the dtype and shape the spec's model has, and be finite. An export is written into
a temporary folder and renamed into place: all or nothing (docs/reliability.md).
"""

from __future__ import annotations

import errno
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from ner_app.errors import NerAppError
from ner_app.limits import MAX_CHAR_WIDTH, MAX_LAYERS, MAX_VOCAB, check_number, check_size
from ner_app.records import sha256_file

INTEGRITY_KEY = "integrity"
_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


class IntegrityError(NerAppError):
    """An export whose files do not belong together or whose tensors do not fit its spec."""


def _sorted_dumps(payload: dict[str, Any], vocab: str | None) -> str:
    """``json.dumps(payload, sort_keys=True)``, its ``"vocab"`` value given as that text when ``vocab`` is not
    None: both checksums hash the 400k-word vocabulary, which is then turned into JSON once, not twice."""
    if vocab is None:
        return json.dumps(payload, sort_keys=True)
    items = (
        f"{json.dumps(k)}: {vocab if k == 'vocab' else json.dumps(payload[k], sort_keys=True)}"
        for k in sorted(payload)
    )
    return "{" + ", ".join(items) + "}"


def vocab_sha256(spec: dict[str, Any], vocab: str | None = None) -> str:
    """sha256 of the spec's vocabularies and tag schemes, in a canonical JSON form (``vocab``: the text of
    ``json.dumps(spec["vocab"], sort_keys=True)``, when it is at hand)."""
    payload = {k: spec.get(k) for k in ("vocab", "scheme", "source_scheme", "model")}
    return hashlib.sha256(_sorted_dumps(payload, vocab).encode()).hexdigest()


# Every key of tagger.json that changes what the tagger predicts (``vocab_sha256`` covers the first four alone:
# exports that have no ``spec_sha256`` were written before it, and are checked on those four).
SPEC_KEYS = ("vocab", "scheme", "source_scheme", "model", "elmo", "max_word_chars")


# Keys that change predictions but only some exports have: hashed when present, so older exports still verify
# ("features": the input features of format /3, which has no "elmo").
OPTIONAL_SPEC_KEYS = ("frozen_word_vectors", "calibration", "features")


def spec_sha256(spec: dict[str, Any], vocab: str | None = None) -> str:
    """sha256 of every key of the spec that changes predictions (``SPEC_KEYS``, and ``OPTIONAL_SPEC_KEYS``
    where present), in a canonical JSON form (``vocab`` as in ``vocab_sha256``)."""
    payload = {k: spec.get(k) for k in SPEC_KEYS}
    payload.update({k: spec[k] for k in OPTIONAL_SPEC_KEYS if k in spec})
    return hashlib.sha256(_sorted_dumps(payload, vocab).encode()).hexdigest()


def integrity_record(spec: dict[str, Any], weights_path: Path) -> dict[str, str]:
    return {
        "weights_sha256": sha256_file(weights_path),
        "vocab_sha256": vocab_sha256(spec),
        "spec_sha256": spec_sha256(spec),
    }


def verify_integrity(spec: dict[str, Any], weights_path: Path, spec_path: Path) -> None:
    """The checksums recorded in ``tagger.json`` against the files as they are now."""
    record = spec.get(INTEGRITY_KEY)
    if not isinstance(record, dict):
        raise IntegrityError(f"{spec_path}: no '{INTEGRITY_KEY}' record (export again with this version)")
    vocab = json.dumps(spec.get("vocab"), sort_keys=True)
    if record.get("vocab_sha256") != vocab_sha256(spec, vocab):
        raise IntegrityError(f"{spec_path}: vocabularies, schemes or sizes were changed after export")
    if "spec_sha256" in record and record["spec_sha256"] != spec_sha256(spec, vocab):
        raise IntegrityError(
            f"{spec_path}: a key that changes predictions ({', '.join(SPEC_KEYS[4:] + OPTIONAL_SPEC_KEYS)}) "
            "was changed after export"
        )
    if record.get("weights_sha256") != sha256_file(weights_path):
        raise IntegrityError(f"{weights_path}: checksum differs from the one recorded in {spec_path.name}")


def check_spec_sizes(spec: dict[str, Any], where: str) -> None:
    """Every size in a ``tagger.json`` within ``ner_app.limits``, before a model is built from it."""
    model = spec.get("model")
    if not isinstance(model, dict):
        raise IntegrityError(f"{where}: 'model' must be a JSON object of sizes")
    for key in ("word_dim", "char_dim", "char_filters", "lstm_hidden"):
        check_size(model.get(key), f"model.{key}", where)
    check_size(model.get("char_width"), "model.char_width", where, high=MAX_CHAR_WIDTH)
    check_size(model.get("lstm_layers"), "model.lstm_layers", where, high=MAX_LAYERS)
    check_number(model.get("dropout"), "model.dropout", where, 0.0, 0.99)
    vocab = spec.get("vocab")
    if not isinstance(vocab, dict):
        raise IntegrityError(f"{where}: 'vocab' must be a JSON object")
    for name in ("words", "chars", "tags"):
        entries = vocab.get(name, {}).get("tokens") if isinstance(vocab.get(name), dict) else None
        if not isinstance(entries, list) or not set(map(type, entries)) <= {
            str
        }:  # JSON makes no str subclass
            raise IntegrityError(f"{where}: 'vocab.{name}.tokens' must be a list of strings")
        check_size(len(entries) + 2, f"vocab.{name} (entries)", where, high=MAX_VOCAB)
    words = len(vocab["words"]["tokens"]) + 2 * bool(vocab["words"].get("specials"))
    check_size(vocab.get("num_trainable_words"), "vocab.num_trainable_words", where, high=words)
    check_size(spec.get("max_word_chars"), "max_word_chars", where, high=MAX_VOCAB)


def check_tensors(found: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], where: str) -> None:
    """Same names, dtypes and shapes as the model built from the spec, and every value finite."""
    missing, unexpected = sorted(expected.keys() - found.keys()), sorted(found.keys() - expected.keys())
    if missing or unexpected:
        raise IntegrityError(
            f"{where}: tensors do not fit tagger.json (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    for name, tensor in found.items():
        want = expected[name]
        if tensor.dtype != want.dtype or tensor.shape != want.shape:
            raise IntegrityError(
                f"{where}: tensor '{name}' is {tensor.dtype} {tuple(tensor.shape)}, "
                f"expected {want.dtype} {tuple(want.shape)}"
            )
        if tensor.is_floating_point() and not _finite(tensor):
            raise IntegrityError(f"{where}: tensor '{name}' holds NaN or infinite values")


def _finite(tensor: torch.Tensor) -> bool:
    """Whether every value is finite. A finite sum in the tensor's own dtype proves it (a NaN or an infinity
    anywhere makes the sum NaN or infinite), and reads the tensor once without a mask as large as the tensor
    (GloVe's frozen rows: 19 million values, 20 times faster than a float64 sum at one thread). A sum that is
    not finite may only have overflowed: then a float64 sum decides, finite exactly when every value is (float32
    values cannot overflow it)."""
    if tensor.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return bool(torch.isfinite(tensor.sum())) or bool(torch.isfinite(tensor.sum(dtype=torch.float64)))
    return bool(torch.isfinite(tensor).all())
