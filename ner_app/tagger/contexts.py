"""Document context set up in one place (docs/document_context.md): for every input feature whose frozen
encoder reads documents, each sentence's stream and its position there."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ner_app.bilm.document import Context, document_contexts, document_keys
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.runs import id_runs


def feature_contexts(
    spec: TaggerSpec,
    sentences: Sequence[Sequence[str]],
    documents: Sequence[int | None] | None,
    cached: Collection[str] = (),
) -> dict[str, list[Context]]:
    """Per feature reading documents (by name), every sentence's context, in order. Consecutive sentences with
    one id in ``documents`` form a document (None: one document of all); a feature reads a document in chunks
    of its ``document_positions``. Empty without such a feature; ``cached`` features (their layers come from
    the layer cache, by ``feature_keys``) are left out."""
    return {
        name: [c for doc in _documents(sentences, documents) for c in document_contexts(doc, positions)]
        for name, positions in _readers(spec).items()
        if name not in cached
    }


def feature_keys(
    spec: TaggerSpec,
    sentences: Sequence[Sequence[str]],
    documents: Sequence[int | None] | None,
    cached: Collection[str],
) -> dict[str, list[bytes]]:
    """Per ``cached`` feature reading documents, every sentence's layer-cache key in its document context."""
    return {
        name: [k for doc in _documents(sentences, documents) for k in document_keys(doc, positions)]
        for name, positions in _readers(spec).items()
        if name in cached
    }


def _readers(spec: TaggerSpec) -> dict[str, int]:
    return {f.name: f.document_positions for f in spec.features if f.document_positions is not None}


def _documents(
    sentences: Sequence[Sequence[str]], documents: Sequence[int | None] | None
) -> list[list[Sequence[str]]]:
    runs = id_runs(documents if documents is not None else [0] * len(sentences))
    return [[sentences[i] for i in run] for run in runs]
