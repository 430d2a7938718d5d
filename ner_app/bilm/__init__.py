"""ELMo's bidirectional language model (Peters et al. 2018), exact to the reference implementation.

The names below are imported on first use, not with the package: the room also holds torch-free modules
(``elmo_models``, ``download``) that light commands import, and ``import ner_app.bilm.elmo_models`` must not
load torch for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ner_app.bilm.bilm import (
        BidirectionalLM,
        BiLMOutput,
        add_sentence_boundaries,
        remove_sentence_boundaries,
    )
    from ner_app.bilm.char_mapper import batch_to_ids, token_to_ids
    from ner_app.bilm.elmo import Elmo, ElmoOutput
    from ner_app.bilm.options import BilmOptions, OptionsError, read_options, write_options
    from ner_app.bilm.scalar_mix import ScalarMix
    from ner_app.bilm.weights import (
        WeightFileError,
        bilm_fingerprint,
        load_bilm,
        load_weights,
        save_bilm,
        save_weights,
    )

_HOMES = {
    "bilm": ("BidirectionalLM", "BiLMOutput", "add_sentence_boundaries", "remove_sentence_boundaries"),
    "char_mapper": ("batch_to_ids", "token_to_ids"),
    "elmo": ("Elmo", "ElmoOutput"),
    "options": ("BilmOptions", "OptionsError", "read_options", "write_options"),
    "scalar_mix": ("ScalarMix",),
    "weights": (
        "WeightFileError",
        "bilm_fingerprint",
        "load_bilm",
        "load_weights",
        "save_bilm",
        "save_weights",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "BidirectionalLM",
    "BiLMOutput",
    "BilmOptions",
    "Elmo",
    "ElmoOutput",
    "OptionsError",
    "ScalarMix",
    "WeightFileError",
    "add_sentence_boundaries",
    "batch_to_ids",
    "bilm_fingerprint",
    "load_bilm",
    "load_weights",
    "read_options",
    "remove_sentence_boundaries",
    "save_bilm",
    "save_weights",
    "token_to_ids",
    "write_options",
]


def __getattr__(name: str) -> object:
    """``from ner_app.bilm import load_bilm``: the name from its module, imported now (PEP 562)."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'ner_app.bilm' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ner_app.bilm.{module}"), name)
