"""``ner-app export --onnx``: a tagger as ONNX graphs, its CRF's scores and a manifest (docs/serving.md).

The folder holds ``tagger.onnx`` (word ids, char ids and the biLM's layers -> CRF emissions), ``bilm.onnx``
(with ELMo: char ids -> the biLM's L+1 layers), ``crf.npz`` (the CRF's start, transition and end scores, the
scheme's forbidden entries already set to ``FORBIDDEN``) and ``onnx.json`` (the format, the tagger spec, the
ELMo char-id layout and every file's sha256). ``ner_app.onnx.predictor`` runs it with onnxruntime and
numpy alone: the constrained Viterbi runs in numpy. Before the folder appears, onnxruntime runs the graphs on
sentences of other shapes than the traced ones, and they must give the tagger's own emissions.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from ner_app.bilm.bilm import add_sentence_boundaries
from ner_app.bilm.char_mapper import (
    BOS_IDS,
    BOS_TOKEN,
    BOW_CHAR,
    EOS_IDS,
    EOS_TOKEN,
    EOW_CHAR,
    MAX_CHARS,
    PAD_CHAR,
)
from ner_app.errors import NerAppError
from ner_app.files import Claim, atomic_folder, claim_folder
from ner_app.onnx.graphs import BilmGraph, TaggerGraph, untrimmed
from ner_app.onnx.quantize import INT8_TOLERANCE, check_quantize, quantize_graph
from ner_app.records import canonical_sha256, sha256_file
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.export import load_export
from ner_app.tagger.features.elmo import ElmoFeature
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec

ONNX_FORMAT = "ner_app.onnx/1"
OPSET = 17
MANIFEST = "onnx.json"
MANIFEST_SUM = "manifest_sha256"  # the sha256 of the manifest's other keys (onnx/manifest.py checks it)
TOLERANCE = 1e-4  # largest emission difference allowed, relative to the largest emission (at least 1)
MAX_GRAPH_BYTES = 1800 << 20  # one .onnx file is one protobuf message, which cannot exceed 2 GiB


class OnnxExportError(NerAppError):
    """A tagger that cannot be exported to ONNX, or graphs that do not compute what it computes."""


def require_onnxruntime() -> ModuleType:
    """onnxruntime (which runs the graphs once to check them), after checking that onnx (which torch's
    exporter writes them with) is there too; else one line saying how to install them."""
    modules: dict[str, ModuleType] = {}
    for name in ("onnx", "onnxruntime"):
        try:
            modules[name] = importlib.import_module(name)
        except ImportError:
            pass
    if len(modules) < 2:
        missing = " and ".join(name for name in ("onnx", "onnxruntime") if name not in modules)
        raise OnnxExportError(
            f"--onnx needs the packages onnx and onnxruntime ({missing} not installed): pip install 'ner_app[onnx]'"
        )
    return modules["onnxruntime"]


def export_onnx_from(
    export_dir: str | Path, output_dir: str | Path, quantize: str | None = None, claim: Claim | None = None
) -> Path:
    """The export folder ``export_dir`` (``load_export``) as an ONNX folder ``output_dir`` (``quantize``:
    None or ``"int8"``, ``onnx_quantize``; ``claim``: as ``export_onnx``)."""
    source, out = Path(export_dir), Path(output_dir)
    require_onnxruntime()
    if source.is_dir() and out.resolve().is_relative_to(source.resolve()):
        raise OnnxExportError(
            f"{out}: inside the export {source}; write the ONNX folder beside it, not into it"
        )
    claim = claim or Claim("export")
    claim_folder(out, claim)
    tagger, spec = load_export(source)
    return export_onnx(tagger, spec, out, quantize, claim)


def export_onnx(
    tagger: BiLstmCrfTagger,
    spec: TaggerSpec,
    output_dir: str | Path,
    quantize: str | None = None,
    claim: Claim | None = None,
) -> Path:
    """Write the ONNX folder (all or nothing, by ``atomic_folder``); the tagger is moved to the CPU, eval mode.
    With ``quantize="int8"`` the graphs are checked in fp32, then quantized (``onnx_quantize``). ``claim``: the
    command writing it (the output policy of ``files.py``; default: ``export``)."""
    check_quantize(quantize)
    out = Path(output_dir)
    ort = require_onnxruntime()
    claim = claim or Claim("export")
    claim_folder(out, claim)
    features = [f.name for f in spec.features]
    if features not in (["words", "chars"], ["words", "chars", "elmo"]):
        raise OnnxExportError(
            f"{out}: the ONNX export covers taggers whose input features are words, chars and optionally elmo "
            f"(this one has {', '.join(features)})"
        )
    if any(f.document_positions is not None for f in spec.features):
        raise OnnxExportError(
            f"{out}: this tagger's biLM reads whole documents (elmo.context: document); the ONNX export "
            "covers taggers whose biLM reads each sentence alone"
        )
    size = sum(p.numel() * p.element_size() for p in [*tagger.parameters(), *tagger.buffers()])
    if size > MAX_GRAPH_BYTES:
        raise OnnxExportError(
            f"{out}: the tagger has {size / 2**30:.1f} GiB of tensors; one ONNX file holds at most 2 GiB"
        )
    tagger = tagger.cpu().eval()
    with atomic_folder(out, claim) as tmp:
        traced = encode_batch(_sentences(spec, (3, 5)), spec)
        inputs = traced["features"]
        layers = None
        if "elmo" in inputs:
            frozen = cast(ElmoFeature, tagger.feature("elmo")).elmo.bilm
            bilm = BilmGraph(frozen).eval()
            ids = add_sentence_boundaries(inputs["elmo"]["chars"])[0]  # (B, T+2, 50)
            with untrimmed(frozen.token_encoder.char_cnn), torch.no_grad():
                layers = bilm(ids)
                _export(
                    bilm,
                    (ids,),
                    tmp / "bilm.onnx",
                    {"char_ids": {0: "batch", 1: "positions"}},
                    ("layers", {1: "batch", 2: "positions"}),
                )
        names: dict[str, dict[int, str]] = {
            "words": {0: "batch", 1: "tokens"},
            "chars": {0: "batch", 1: "tokens", 2: "word_chars"},
        }
        args: tuple[torch.Tensor, ...] = (inputs["words"]["ids"], inputs["chars"]["ids"])
        if layers is not None:
            names["layers"], args = {1: "batch", 2: "positions"}, (*args, layers)
        _export(
            TaggerGraph(tagger), args, tmp / "tagger.onnx", names, ("emissions", {0: "batch", 1: "tokens"})
        )
        start, trans, end = (s.detach().float().numpy() for s in tagger.crf._scores())  # what decode uses
        np.savez(tmp / "crf.npz", start=start, transitions=trans, end=end)
        if quantize is not None:
            check_graphs(ort, tmp, tagger, spec, str(out))  # the fp32 graphs compute the tagger's emissions
            for graph in ("tagger.onnx", "bilm.onnx"):
                if (tmp / graph).exists():
                    quantize_graph(tmp / graph)
        manifest = _manifest(spec, sorted(p.name for p in tmp.iterdir()), tmp, quantize)
        (tmp / MANIFEST).write_text(json.dumps(manifest) + "\n", encoding="utf-8")
        check_graphs(ort, tmp, tagger, spec, str(out), TOLERANCE if quantize is None else INT8_TOLERANCE)
    return out


def _export(
    module: nn.Module,
    args: tuple[torch.Tensor, ...],
    path: Path,
    inputs: dict[str, dict[int, str]],
    output: tuple[str, dict[int, str]],
) -> None:
    # The TorchScript exporter: it compiles the biLM's scripted time loop into an ONNX Loop (the dynamo
    # exporter would unroll a Python loop for the traced length). Its deprecation and tracer notes are known.
    module.eval()  # the exporter leaves a module in the mode it found it in, and a fresh one is in training
    with warnings.catch_warnings(), torch.no_grad(), _held_notes(path.parent / ".stderr"):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=list(inputs),
            output_names=[output[0]],
            dynamic_axes={**inputs, output[0]: output[1]},
        )


KNOWN_NOTES = ("The shape inference of prim::PackPadded", "The shape inference of prim::PadPacked")


@contextmanager
def _held_notes(spool: Path) -> Iterator[None]:
    """Hold back the exporter's C++ notes that the packed LSTM's ops have no shape inference: they go straight
    to file descriptor 2, past Python's warning filters, and are harmless here (``check_graphs`` runs the graph
    on other shapes). Every other line written to stderr meanwhile is passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(spool, "w+b") as held:
            os.dup2(held.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                held.seek(0)
                text = held.read().decode("utf-8", errors="replace")
                kept = [line for line in text.splitlines() if not any(note in line for note in KNOWN_NOTES)]
                sys.stderr.writelines(f"{line}\n" for line in kept)
    finally:
        os.close(saved)
        spool.unlink(missing_ok=True)


def _manifest(
    spec: TaggerSpec, files: list[str], folder: Path, quantize: str | None = None
) -> dict[str, Any]:
    """``onnx.json``: the spec, the char layout and every file's sha256, under a checksum of its own."""
    elmo_chars = {
        "max_chars": MAX_CHARS,
        "begin_word": BOW_CHAR + 1,
        "end_word": EOW_CHAR + 1,
        "pad": PAD_CHAR + 1,
        "shift": 1,
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "bos": list(BOS_IDS),
        "eos": list(EOS_IDS),
    }
    manifest = {
        "format": ONNX_FORMAT,
        "spec": spec.to_json(),
        "graphs": {"tagger": "tagger.onnx", "bilm": "bilm.onnx" if spec.elmo is not None else None},
        "crf": "crf.npz",
        "elmo_chars": elmo_chars if spec.elmo is not None else None,  # what char_mapper.token_to_ids does
        "opset": OPSET,
        "torch": torch.__version__,
        "sha256": {name: sha256_file(folder / name) for name in files},
    }
    if quantize is not None:  # only then: an fp32 manifest stays what earlier versions wrote
        manifest["quantize"] = quantize
    return {**manifest, MANIFEST_SUM: canonical_sha256(manifest)}  # the tags, sizes and char layout included


def _sentences(spec: TaggerSpec, lengths: Sequence[int], shift: int = 0) -> list[list[str]]:
    """Sentences of the given lengths (the last at least 2) from the vocabulary; the last one ends in an
    unknown word and a 47-character one."""
    pool = list(spec.words.tokens[:40]) or ["x"]
    found = [[pool[(shift + 7 * b + i) % len(pool)] for i in range(n)] for b, n in enumerate(lengths)]
    found[-1][-2:] = ["Zürich-9", "Unheard" + "x" * 40]
    return found


def check_graphs(
    ort: ModuleType,
    folder: Path,
    tagger: BiLstmCrfTagger,
    spec: TaggerSpec,
    name: str,
    tolerance: float = TOLERANCE,
) -> float:
    """Run the graphs in ``folder`` with onnxruntime on sentences of other shapes than the traced ones; their
    emissions must be the tagger's within ``tolerance`` (else an error naming ``name``). Returns the largest
    difference."""
    batch = encode_batch(_sentences(spec, (1, 7, 4), shift=3), spec)
    inputs = batch["features"]
    with torch.no_grad():
        expected = tagger.emissions(batch).numpy()  # the biLM runs on the char ids here, as in predict
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only
    feeds = {"words": inputs["words"]["ids"].numpy(), "chars": inputs["chars"]["ids"].numpy()}
    if "elmo" in inputs:
        bilm = ort.InferenceSession(str(folder / "bilm.onnx"), options, providers=["CPUExecutionProvider"])
        ids = add_sentence_boundaries(inputs["elmo"]["chars"])[0].numpy()
        feeds["layers"] = bilm.run(None, {"char_ids": ids})[0]
    graph = ort.InferenceSession(str(folder / "tagger.onnx"), options, providers=["CPUExecutionProvider"])
    found = graph.run(None, feeds)[0]
    mask = batch["mask"].numpy()
    gap = float(np.abs(found - expected)[mask].max())
    bound = tolerance * max(1.0, float(np.abs(expected[mask]).max()))
    if not gap <= bound:  # also catches NaN
        raise OnnxExportError(
            f"{name}: onnxruntime's emissions differ from the tagger's by {gap:.2e} (more than {bound:.1e}); "
            "nothing was written"
        )
    return gap


__all__ = ["ONNX_FORMAT", "OnnxExportError", "export_onnx", "export_onnx_from"]
