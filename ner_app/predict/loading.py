"""A model folder, whichever kind, loaded as a predictor: the one place every inference command (predict,
evaluate, serve, select, find-threshold, calibrate) and ``ner_app.load_tagger`` load ``--model`` from.

Two kinds of folder tag text: a torch export (``tagger.json`` and its weights, ``tagger/export.py``), run by
``Predictor``, and an ONNX folder (``onnx.json`` and its graphs, ``ner-app export --onnx``), run by
``OnnxPredictor`` on onnxruntime and numpy. The kind is read off the folder; torch is imported only for a
torch export, so an ONNX folder is tagged where torch is not installed. Both answer the same calls (``tag``,
``read``, ``to_source``, ``tag_lines``, ``predict_texts``, ``emission_batches``, ``tags``, ``scheme``,
``calibrated``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, Union

from ner_app.errors import MissingFileError, NerAppError
from ner_app.text.batching import PREDICT_BATCH_SIZE, PREDICT_MAX_TOKENS

if TYPE_CHECKING:
    from ner_app.onnx.predictor import OnnxPredictor
    from ner_app.predict.predictor import Predictor

AnyPredictor = Union["Predictor", "OnnxPredictor"]  # noqa: UP007 (a string union: neither is imported here)
ModelKind = Literal["torch", "onnx"]
ONNX_MANIFEST = "onnx.json"  # what marks an ONNX folder (onnx/export.py MANIFEST; a test keeps them equal)
TORCH_SPEC = "tagger.json"  # what marks a torch export (tagger/export.py)


def model_kind(folder: str | Path) -> ModelKind:
    """``onnx`` for a folder with ``onnx.json`` and no ``tagger.json``, else ``torch`` (whose loader says in
    one line what a folder that is neither lacks)."""
    root = Path(folder)
    return "onnx" if (root / ONNX_MANIFEST).is_file() and not (root / TORCH_SPEC).exists() else "torch"


def check_device(device: str) -> None:
    """``--device cuda`` on a machine without CUDA is the user's choice to correct, in one line."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise NerAppError(
            f"--device cuda: torch {torch.__version__} sees no CUDA device here; use --device cpu"
        )


def set_threads(threads: int | None) -> None:
    """torch's CPU threads, when given (None: torch's default)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def check_onnx_device(folder: str | Path, device: str) -> None:
    """An ONNX folder runs on the CPU (onnxruntime's CPU provider): any other device is one line."""
    if device != "cpu":
        raise NerAppError(
            f"--device {device}: {folder} is an ONNX folder, which runs on the CPU (onnxruntime); leave "
            "--device out or give a torch export"
        )


def check_model_device(folder: str | Path, device: str) -> None:
    """``device`` for the model folder ``folder``, before anything else is read: an ONNX folder's is the CPU,
    a torch export's one torch sees (torch is imported only then)."""
    if model_kind(folder) == "onnx":
        check_onnx_device(folder, device)
    else:
        check_device(device)


def load_predictor(
    folder: str | Path,
    device: str = "cpu",
    batch_size: int = PREDICT_BATCH_SIZE,
    max_tokens: int | None = PREDICT_MAX_TOKENS,
    threads: int | None = None,
) -> AnyPredictor:
    """The predictor of the model folder ``folder``: ``OnnxPredictor`` for an ONNX folder (``threads``:
    onnxruntime's per graph), else ``Predictor.from_export`` (``threads``: torch's, set here; ``device``
    checked). One ``NerAppError`` line for a folder that is neither or is broken."""
    if model_kind(folder) == "onnx":
        check_onnx_device(folder, device)
        from ner_app.onnx.predictor import OnnxPredictor

        return OnnxPredictor(folder, batch_size=batch_size, threads=threads, max_tokens=max_tokens)
    root = Path(folder)
    if root.is_dir() and not (root / TORCH_SPEC).exists() and any(root.glob("*.onnx")):
        raise MissingFileError(  # graphs without their manifest: not a torch export either
            f"{root}: an ONNX folder without {ONNX_MANIFEST} (it holds .onnx graphs); export it again with "
            "ner-app export --onnx"
        )
    set_threads(threads)
    check_device(device)
    from ner_app.predict.predictor import Predictor

    return Predictor.from_export(folder, device=device, batch_size=batch_size, max_tokens=max_tokens)
