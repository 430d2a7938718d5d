"""ELMo BiLSTM-CRF named-entity tagging (Peters et al. 2018).

The Python API (docs/python_api.md)::

    import ner_app

    tagger = ner_app.load_tagger()  # the shipped CoNLL-2003 tagger, or load_tagger("runs/x/export")
    tagger.predict(["Angela Merkel met Emmanuel Macron in Berlin."])
    embedder = ner_app.load_bilm()  # the shipped biLM, or load_bilm("path/to/bilm")
    embedder.embed(["The first sentence.", ["pre", "tokenised"]])

``import ner_app`` stays light: torch and the model code load on first use of these names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ner_app.predict.api import Embedder, Embedding, Entity, Tagger, load_bilm, load_tagger

__all__ = ["Embedder", "Embedding", "Entity", "Tagger", "load_bilm", "load_tagger"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ner_app.predict import api

        return getattr(api, name)
    raise AttributeError(f"module 'ner_app' has no attribute {name!r}")
