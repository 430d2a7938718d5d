"""The tagger as plain data (a JSON spec + safetensors weights + the biLM files): build, export, load.

A spec is everything needed to rebuild a trained tagger without the training data: model sizes, the
vocabularies, the tag schemes and the biLM it was trained with (paths and a fingerprint of its weights). It is
stored in every Lightning checkpoint and, with the weights, in an export directory that loads without pickle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.elmo import Elmo
from ner_app.bilm.layer_cache import bilm_fingerprint
from ner_app.bilm.weights import load_bilm, save_bilm
from ner_app.data.vocab import Vocab
from ner_app.errors import NerAppError
from ner_app.export_integrity import (
    INTEGRITY_KEY,
    atomic_folder,
    check_spec_sizes,
    check_tensors,
    integrity_record,
    verify_integrity,
)
from ner_app.safe_load import load_checkpoint
from ner_app.tagger.constraints import allowed_transitions
from ner_app.tagger.model import BiLstmCrfTagger

SPEC_FORMAT = "ner_app.tagger/1"
BILM_PREFIX = "elmo.bilm."  # tagger state-dict keys of the frozen biLM, stored in its own files instead


class ExportError(NerAppError):
    """An export directory or checkpoint that cannot be loaded."""


def make_spec(
    model: dict[str, Any],
    elmo: dict[str, Any] | None,
    words: Vocab,
    num_trainable_words: int,
    chars: Vocab,
    tags: Vocab,
    scheme: str,
    source_scheme: str,
    max_word_chars: int,
) -> dict[str, Any]:
    """A JSON-ready spec. ``model``: the tagger's size arguments; ``elmo``: options/weights paths, fingerprint,
    dropout and do_layer_norm, or None without ELMo."""
    return {
        "format": SPEC_FORMAT,
        "model": dict(model),
        "elmo": dict(elmo) if elmo is not None else None,
        "vocab": {
            "words": words.to_dict(),
            "num_trainable_words": num_trainable_words,
            "chars": chars.to_dict(),
            "tags": tags.to_dict(),
        },  # fmt: skip
        "scheme": scheme,
        "source_scheme": source_scheme,
        "max_word_chars": max_word_chars,
    }


def vocabularies(spec: dict[str, Any]) -> tuple[Vocab, Vocab, Vocab]:
    """(words, chars, tags) of a spec."""
    v = spec["vocab"]
    return Vocab.from_dict(v["words"]), Vocab.from_dict(v["chars"]), Vocab.from_dict(v["tags"])


def build_tagger(spec: dict[str, Any], bilm: BidirectionalLM | None) -> BiLstmCrfTagger:
    """A freshly initialised tagger of the spec's shape (load weights separately)."""
    if spec.get("format") != SPEC_FORMAT:
        raise ExportError(f"tagger spec format is {spec.get('format')!r}, expected {SPEC_FORMAT!r}")
    words, chars, tags = vocabularies(spec)
    trainable = spec["vocab"]["num_trainable_words"]
    elmo = None
    if spec["elmo"] is not None:
        if bilm is None:
            raise ExportError("this tagger was trained with ELMo: a biLM is needed to build it")
        elmo = Elmo(bilm, dropout=spec["elmo"]["dropout"], do_layer_norm=spec["elmo"]["do_layer_norm"])
    return BiLstmCrfTagger(
        num_words=trainable, frozen_words=len(words) - trainable, num_chars=len(chars), num_tags=len(tags),
        elmo=elmo, allowed=allowed_transitions(tags.itos, spec["scheme"]), **spec["model"],
    )  # fmt: skip


def check_bilm(spec: dict[str, Any], bilm: BidirectionalLM, source: str) -> None:
    """The biLM must be the one the tagger was trained with: same fingerprint of its weights."""
    expected, found = spec["elmo"]["fingerprint"], bilm_fingerprint(bilm)
    if expected != found:
        raise ExportError(
            f"{source}: the biLM weights differ from those the tagger was trained with "
            f"(fingerprint {found[:16]}..., expected {expected[:16]}...)"
        )


def tagger_state(tagger: BiLstmCrfTagger) -> dict[str, torch.Tensor]:
    """The tagger's tensors without the frozen biLM (which lives in its own files)."""
    return {
        k: v.detach().cpu().contiguous()
        for k, v in tagger.state_dict().items()
        if not k.startswith(BILM_PREFIX)
    }


def export_model(tagger: BiLstmCrfTagger, spec: dict[str, Any], output_dir: str | Path) -> Path:
    """Write ``model.safetensors``, ``tagger.json`` and (with ELMo) ``bilm/options.json`` + ``bilm/weights.hdf5``,
    all or nothing (a temporary folder renamed into place); non-finite weights are refused."""
    out = Path(output_dir)
    spec = json.loads(json.dumps(spec))  # a copy we may edit
    state = tagger_state(tagger)
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise ExportError(f"{out}: refusing to export non-finite weights ({', '.join(bad[:3])})")
    with atomic_folder(out) as tmp:
        if spec["elmo"] is not None:
            assert tagger.elmo is not None
            save_bilm(tagger.elmo.bilm, tmp / "bilm")  # exact: the public format round-trips bit for bit
            spec["elmo"].update(options="bilm/options.json", weights="bilm/weights.hdf5")
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": SPEC_FORMAT})
        spec[INTEGRITY_KEY] = integrity_record(spec, tmp / "model.safetensors")
        (tmp / "tagger.json").write_text(json.dumps(spec) + "\n", encoding="utf-8")
    return out


def load_export(export_dir: str | Path, device: str = "cpu") -> tuple[BiLstmCrfTagger, dict[str, Any]]:
    """Load an export (no pickle anywhere: JSON, safetensors, hdf5), verifying checksums, sizes, dtypes, shapes
    and finiteness first. Returns the tagger in eval mode and its spec."""
    root = Path(export_dir)
    if not root.is_dir():
        raise ExportError(f"{root}: not a folder (expected an export directory)")
    spec_path, weights_path = root / "tagger.json", root / "model.safetensors"
    for path in (spec_path, weights_path):
        if not path.is_file():
            raise ExportError(f"{root}: not a ner_app export (missing {path.name})")
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ExportError(f"{spec_path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise ExportError(f"{spec_path}: not a JSON file (byte {err.start} is not UTF-8)") from None
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        found = spec.get("format") if isinstance(spec, dict) else type(spec).__name__
        raise ExportError(f"{spec_path}: tagger spec format is {found!r}, expected {SPEC_FORMAT!r}")
    check_spec_sizes(spec, str(spec_path))
    verify_integrity(spec, weights_path, spec_path)
    bilm = None
    if spec.get("elmo") is not None:
        bilm = load_bilm(root / spec["elmo"]["options"], root / spec["elmo"]["weights"])
        check_bilm(spec, bilm, str(root))
    tagger = build_tagger(spec, bilm)
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as err:
        raise ExportError(f"{weights_path}: not a readable safetensors file ({err})") from None
    check_tensors(state, tagger_state(tagger), str(weights_path))
    tagger.load_state_dict(state, strict=False)
    return tagger.to(device).eval(), spec


def export_checkpoint(checkpoint_path: str | Path, output_dir: str | Path) -> Path:
    """Export a Lightning checkpoint written by ``train.py`` (its biLM is read from the paths it records)."""
    path = Path(checkpoint_path)
    checkpoint = load_checkpoint(path)  # weights_only, one clear line for a bad file
    spec = checkpoint.get("ner_app")
    if not isinstance(spec, dict):
        raise ExportError(f"{path}: no ner_app tagger spec in this checkpoint (was it written by train.py?)")
    check_spec_sizes(spec, str(path))
    bilm = None
    if spec["elmo"] is not None:
        bilm = load_bilm(spec["elmo"]["options"], spec["elmo"]["weights"])
        check_bilm(spec, bilm, str(path))
    tagger = build_tagger(spec, bilm)
    state = {k.removeprefix("tagger."): v for k, v in checkpoint["state_dict"].items()}
    missing, unexpected = tagger.load_state_dict(state, strict=False)
    if [k for k in missing if not k.startswith(BILM_PREFIX)] or unexpected:
        raise ExportError(
            f"{path}: state dict does not fit its spec (missing {missing}, unexpected {unexpected})"
        )
    return export_model(tagger, spec, output_dir)
