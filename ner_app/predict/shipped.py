"""Where the shipped tagger and biLM live (``data/`` of a clone), without importing torch: the commands that
only need the path (``predict --workers``, whose model loads in the worker processes) stay light."""

from __future__ import annotations

from pathlib import Path

from ner_app.errors import MissingFileError

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED_MODEL = REPOSITORY / "data" / "models" / "conll2003"
SHIPPED_BILM = REPOSITORY / "data" / "bilm"


def shipped(path: Path, what: str) -> Path:
    """A shipped folder, or one clear line when this installation lacks it (a wheel has no ``data/``)."""
    if not path.is_dir():
        raise MissingFileError(
            f"{path}: the shipped {what} is not in this installation (it comes with the repository's data/ "
            "folder: install from a clone with pip install -e ., or pass a path)"
        )
    return path
