"""Pretraining with ``shuffle: documents`` and ``sentence_reset: false`` reads every document as the stream of
document-context ELMo: checked by running ``training_step`` over a corpus and comparing with ``stream_layers``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ner_app.bilm.document import stream_layers
from ner_app.pretrain.data import document_starts, pack, read_corpus
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.streams import StreamBatches
from ner_app.pretrain.vocab import SoftmaxVocab
from tests.helpers import TINY_OPTIONS

DOCUMENTS = [
    [["the", "big", "cat", "sees", "a", "dog", "."], ["it", "runs", "."]],
    [["a", "red", "bird"], ["the", "old", "fish", "eats", "."], ["and", "so", "on", "."]],
    [["one", "more", "."]],
    [["last", "document", "here", "."], ["two", "sentences", "."]],
]


def write_corpus(path: Path) -> Path:
    path.write_text("\n\n".join("\n".join(" ".join(s) for s in doc) for doc in DOCUMENTS) + "\n")
    return path


def train_tops(module: BilmLanguageModel, batches: StreamBatches, drop_document_resets: bool = False):
    """Each direction's top layer (B, S, P) over an epoch's streams, as ``training_step`` computes it."""
    tops: dict[str, list[torch.Tensor]] = {"forward": [], "backward": []}
    direction_top = module.direction_top

    def spy(direction: str, x: torch.Tensor, resets: torch.Tensor | None = None) -> torch.Tensor:
        top = direction_top(direction, x, resets)
        tops[direction].append(top.detach())
        return top

    module.direction_top = spy  # type: ignore[method-assign]
    module.log = module.log_dict = lambda *a, **k: None  # type: ignore[method-assign]  # no trainer attached
    with torch.no_grad():
        for k in range(len(batches)):
            batch = batches.batch(0, k)
            if drop_document_resets:
                for direction in ("forward", "backward"):
                    batch[direction]["document_resets"] = None
            module.training_step(batch, k)
    return torch.cat(tops["forward"], dim=1), torch.cat(tops["backward"][::-1], dim=1)


@pytest.mark.parametrize("unroll_steps", [4, 9])
def test_document_streams_without_sentence_resets_are_document_context(tmp_path: Path, unroll_steps: int):
    corpus = read_corpus(write_corpus(tmp_path / "docs.txt"))
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=40)
    batches = StreamBatches(
        corpus, vocab, batch_size=1, unroll_steps=unroll_steps, shuffle="documents", seed=3
    )
    torch.manual_seed(0)
    module = BilmLanguageModel(
        TINY_OPTIONS.to_dict(), len(vocab), 8, dropout=0.0, sentence_reset=False
    ).eval()
    forward, backward = train_tops(module, batches)  # (1, S, P) each
    p = module.bilm.projection_dim
    stream = pack(corpus, "documents", seed=3, epoch=0)
    starts = np.flatnonzero(document_starts(corpus, "documents", seed=3, epoch=0)).tolist()
    spans = list(zip(starts, [*starts[1:], len(stream)], strict=True))
    assert len(spans) == len(DOCUMENTS) and starts[0] == 0
    as_text = {tuple(t for s in doc for t in ["<S>", *s, "</S>"]): doc for doc in DOCUMENTS}
    for a, b in spans:
        document = as_text[tuple(corpus.types[i] for i in stream[a:b])]  # each span is a whole document
        with torch.no_grad():
            expected = torch.cat(stream_layers(module.bilm, [document])[0], dim=1)[-1]  # top layer (S_d, 2P)
        torch.testing.assert_close(forward[0, a:b], expected[:, :p], atol=2e-6, rtol=1e-5)
        torch.testing.assert_close(backward[0, a:b], expected[:, p:], atol=2e-6, rtol=1e-5)
    # Without the document resets the state ran on from the previous document (forward) and from the next one
    # (backward): not the stream of document-context ELMo.
    module.states = {"forward": None, "backward": None}
    carried_forward, carried_backward = train_tops(module, batches, drop_document_resets=True)
    (a, b), (c, d) = spans[1], spans[0]
    assert (carried_forward[0, a:b] - forward[0, a:b]).abs().max() > 1e-3
    assert (carried_backward[0, c:d] - backward[0, c:d]).abs().max() > 1e-3


def test_document_starts_mark_each_documents_first_sentence(tmp_path: Path):
    corpus = read_corpus(write_corpus(tmp_path / "docs.txt"))
    bos = corpus.types.index("<S>")
    for shuffle in ("documents", "none"):
        flags = document_starts(corpus, shuffle, seed=1, epoch=2)
        stream = pack(corpus, shuffle, seed=1, epoch=2)
        assert flags.sum() == len(DOCUMENTS) and (stream[flags] == bos).all() and flags[0]
    assert not document_starts(corpus, "sentences", seed=1, epoch=2).any()
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=40)
    batch = StreamBatches(corpus, vocab, batch_size=2, unroll_steps=5, shuffle="sentences").batch(0, 0)
    assert batch["forward"]["document_resets"] is None  # shuffled sentences have no documents to restart
