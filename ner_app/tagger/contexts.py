"""Document context set up in one place (docs/document_context.md): for every input feature whose frozen
encoder reads documents, each sentence's stream and its position there."""

from __future__ import annotations

from collections.abc import Sequence

from ner_app.bilm.document import Context, document_contexts
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.runs import id_runs


def feature_contexts(
    spec: TaggerSpec, sentences: Sequence[Sequence[str]], documents: Sequence[int] | None
) -> dict[str, list[Context]]:
    """Per feature reading documents (by name), every sentence's context, in order. Consecutive sentences with
    one id in ``documents`` form a document (None: one document of all); a feature reads a document in chunks
    of its ``document_positions``. Empty without such a feature."""
    readers = {f.name: f.document_positions for f in spec.features if f.document_positions is not None}
    if not readers:
        return {}
    runs = id_runs(documents if documents is not None else [0] * len(sentences))
    out: dict[str, list[Context]] = {}
    for name, positions in readers.items():
        contexts: list[Context] = []
        for run in runs:
            contexts += document_contexts([sentences[i] for i in run], positions)
        out[name] = contexts
    return out
