"""Viterbi tags of a whole list of sentences by a tagger and its spec, outside any training loop (a continued
run scores the old model's dev file with the export it started from, and with the model it trained)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ner_app.tagger.inference import inference_batches
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec


def decode_sentences(
    tagger: BiLstmCrfTagger,
    spec: TaggerSpec,
    sentences: Sequence[Sequence[str]],
    documents: Sequence[int],
    batch_size: int = 64,
    max_tokens: int | None = 32768,
) -> list[list[str]]:
    """Tags (the training scheme) of every non-empty sentence, in order. A tagger trained with document context
    reads each sentence in its document (consecutive sentences of one id in ``documents``), as in training."""
    was_training = tagger.training
    tagger.eval()
    out: dict[int, list[str]] = {}
    try:
        with torch.inference_mode():
            batches = inference_batches(
                tagger, spec, sentences, documents, batch_size, max_tokens, keep_order=True
            )
            for group, batch in batches:
                out.update(zip(group, spec.decode_tags(tagger.decode(batch), batch["mask"]), strict=True))
    finally:
        tagger.train(was_training)
    return [out[i] for i in range(len(sentences))]
