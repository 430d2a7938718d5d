"""What a job sets up before its work: torch's threads, the device (both owned by ``predict/loading.py``,
which loads a model folder of either kind), the export (``--model`` or the shipped tagger). torch is imported
inside, only by the jobs that use it."""

from __future__ import annotations

from pathlib import Path

from ner_app.predict.loading import check_device, set_threads

__all__ = ["check_device", "model_path", "set_threads"]


def model_path(model: str | None) -> Path:
    """--model, or the shipped CoNLL-2003 tagger."""
    from ner_app.predict.shipped import SHIPPED_MODEL, shipped

    return Path(model) if model else shipped(SHIPPED_MODEL, "CoNLL-2003 tagger (--model)")
