"""The one inference loop: sentences cut into token-budget batches (``text/batching.py``), each encoded with the
spec and every feature's document context (``tagger/contexts.py``) and moved to the tagger's device.

Every inference outside Lightning's loops runs its batches from here: ``predict/predictor.py`` (predict,
evaluate, the Python API, the server, calibrate, find-threshold and select) and a continued run's scoring of the
old dev file (``decode_all.py``). What each caller computes on a batch (best paths, scores, emissions) is its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ner_app.errors import raise_if_stopped
from ner_app.tagger.batch import Batch, batch_to, encode_batch
from ner_app.tagger.contexts import feature_contexts
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.batching import budget_batches


def inference_batches(
    tagger: BiLstmCrfTagger,
    spec: TaggerSpec,
    sentences: Sequence[Sequence[str]],
    documents: Sequence[int | None] | None = None,
    batch_size: int = 64,
    max_tokens: int | None = 32768,
    keep_order: bool = False,
) -> Iterator[tuple[list[int], Batch]]:
    """(indices into ``sentences``, their batch on the tagger's device) for every batch of the non-empty
    ``sentences``: by length, or in input order with ``keep_order`` and always where a feature reads documents
    (consecutive sentences with one id in ``documents``; None: one document of all), so that a batch runs few
    streams. Nothing is kept between calls."""
    contexts = feature_contexts(spec, sentences, documents)
    device = next(tagger.parameters()).device
    lengths = [len(s) for s in sentences]
    for group in budget_batches(lengths, batch_size, max_tokens, keep_order=keep_order or bool(contexts)):
        raise_if_stopped()  # between batches: a Ctrl-C or SIGTERM whose first raise Python dropped
        inputs = {name: {"context": [c[i] for i in group]} for name, c in contexts.items()}
        batch = encode_batch([sentences[i] for i in group], spec, index=group, inputs=inputs)
        yield group, batch_to(batch, device)
