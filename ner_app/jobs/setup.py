"""What a job sets up before its work: torch's threads, the device, the export (``--model`` or the shipped
tagger). torch is imported inside, only by the jobs that use it."""

from __future__ import annotations

from pathlib import Path

from ner_app.errors import NerAppError


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


def model_path(model: str | None) -> Path:
    """--model, or the shipped CoNLL-2003 tagger."""
    from ner_app.predict.shipped import SHIPPED_MODEL, shipped

    return Path(model) if model else shipped(SHIPPED_MODEL, "CoNLL-2003 tagger (--model)")
