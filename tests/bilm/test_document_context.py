"""Document-context ELMo: the stream definition against a step-by-step oracle, invariances, chunks, cache keys."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.char_mapper import BOS_IDS, EOS_IDS, batch_to_ids, token_to_ids
from ner_app.bilm.document import (
    chunk_document,
    context_layers,
    document_contexts,
    document_keys,
    stream_batches,
    stream_layers,
)
from ner_app.train.layer_cache import LayerCache, fill_document_cache, sentence_key
from tests.helpers import random_bilm

DOC = [
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
    ["Peter", "Blackburn"],
    ["BRUSSELS", "1996-08-22"],
    ["The", "European", "Commission", "said", "on", "Thursday", "it", "disagreed", "."],
]
OTHER = [["Germany", "'s", "representative"], ["Werner", "Zwingmann", "said", "so", "."]]


@pytest.fixture(scope="module")
def bilm() -> BidirectionalLM:
    return random_bilm()


def layers_of(bilm: BidirectionalLM, streams: list[list[list[str]]]) -> list[list[torch.Tensor]]:
    with torch.inference_mode():
        return stream_layers(bilm, streams)


def oracle(bilm: BidirectionalLM, document: list[list[str]]) -> torch.Tensor:
    """The definition, by hand: one stream of <S> w.. </S> per sentence; every LSTM cell's equations stepped
    one position at a time from zero state, forward left to right, backward right to left. (L+1, S, 2P)."""
    ids = [i for s in document for i in [BOS_IDS, *(token_to_ids(t) for t in s), EOS_IDS]]
    with torch.inference_mode():
        x = bilm.token_encoder.embed_all(torch.tensor(ids))  # (S, P)
        lstm = bilm.lstm
        directions = []
        for layers, flip in ((lstm.forward_layers, False), (lstm.backward_layers, True)):
            inputs = x.flip(0) if flip else x
            outs = []
            for index, cell in enumerate(layers):
                h, c = torch.zeros(cell.projection_size), torch.zeros(cell.cell_size)
                steps = []
                for t in range(inputs.shape[0]):
                    z = cell.input_linearity(inputs[t]) + cell.state_linearity(h)  # (4C,)
                    i, j, f, o = z.chunk(4)
                    c = torch.sigmoid(f + cell.forget_bias) * c + torch.sigmoid(i) * torch.tanh(j)
                    c = c.clamp(-cell.cell_clip, cell.cell_clip)
                    h = cell.projection(torch.sigmoid(o) * torch.tanh(c)).clamp(
                        -cell.proj_clip, cell.proj_clip
                    )
                    steps.append(h)
                out = torch.stack(steps)  # (S, P)
                if lstm.use_skip_connections and index > 0:
                    out = out + inputs
                outs.append(out.flip(0) if flip else out)
                inputs = out
            directions.append(outs)
        return torch.stack(
            [torch.cat([x, x], -1)] + [torch.cat(p, -1) for p in zip(*directions, strict=True)]
        )


def test_one_sentence_document_is_sentence_mode_bit_for_bit(bilm):
    with torch.inference_mode():
        alone = bilm(batch_to_ids(DOC))
    streams = layers_of(bilm, [[s] for s in DOC])  # the same batch, each sentence a document of its own
    for b, sentence in enumerate(DOC):
        (got,) = streams[b]
        assert torch.equal(got, torch.stack(alone.layers)[:, b, : len(sentence) + 2])


def test_stream_equals_the_step_by_step_oracle(bilm):
    expected = oracle(bilm, DOC)  # (L+1, S, 2P)
    offset = 0
    for sentence, got in zip(DOC, layers_of(bilm, [DOC])[0], strict=True):
        n = len(sentence) + 2
        torch.testing.assert_close(got, expected[:, offset : offset + n], atol=2e-6, rtol=1e-5)
        offset += n
    assert offset == expected.shape[1]


def test_a_document_alone_equals_it_padded_in_a_batch(bilm):
    alone = layers_of(bilm, [DOC])[0]
    batched = layers_of(bilm, [OTHER, DOC, DOC[:1], [["x"]]])[1]  # longer and shorter streams around it
    for a, b in zip(alone, batched, strict=True):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-6)


def test_sentences_depend_on_their_neighbours_in_the_right_direction(bilm):
    first, second = DOC[0], DOC[1]
    p = bilm.projection_dim
    with torch.inference_mode():
        sentence_mode = [torch.stack(bilm(batch_to_ids([s])).layers)[:, 0] for s in (first, second)]
    doc = layers_of(bilm, [[first, second]])[0]
    changed = layers_of(bilm, [[first, ["Someone", "else"]]])[0]
    changed_first = layers_of(bilm, [[["Other", "news", "."], second]])[0]
    for got, alone in zip(doc, sentence_mode, strict=True):
        # layer 0 is the token encoder's: no context (not bit-equal on every CPU: a batch of another size
        # may take another matmul blocking)
        torch.testing.assert_close(got[0], alone[0], atol=1e-6, rtol=1e-6)
        assert not torch.allclose(got[1:], alone[1:], atol=1e-3)  # the LSTM layers see the neighbour
    # the forward LM of sentence 1 has not read sentence 2; its backward LM has, and vice versa
    torch.testing.assert_close(changed[0][1:, :, :p], doc[0][1:, :, :p], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(changed[0][1:, :, p:], doc[0][1:, :, p:], atol=1e-3)
    torch.testing.assert_close(changed_first[1][1:, :, p:], doc[1][1:, :, p:], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(changed_first[1][1:, :, :p], doc[1][1:, :, :p], atol=1e-3)


def test_context_layers_have_the_bilm_output_layout(bilm):
    contexts = document_contexts(DOC) + document_contexts(OTHER)
    order = [4, 0, 2, 5, 1, 3]  # a batch mixes documents and positions
    with torch.inference_mode():
        layers, mask = context_layers(bilm, [contexts[i] for i in order])
    streams = layers_of(bilm, [DOC, OTHER])
    per_sentence = streams[0] + streams[1]
    assert mask.tolist() == [[t < per_sentence[i].shape[1] for t in range(mask.shape[1])] for i in order]
    for b, i in enumerate(order):
        n = per_sentence[i].shape[1]
        for layer, ref in zip(layers, per_sentence[i], strict=True):
            torch.testing.assert_close(layer[b, :n], ref, atol=1e-6, rtol=1e-6)
            assert not layer[b, n:].any()


def test_chunks_cover_the_document_in_order_and_are_maximal():
    rng = random.Random(0)
    for _ in range(200):
        lengths = [rng.randint(0, 30) for _ in range(rng.randint(0, 20))]
        cap = rng.randint(2, 80)
        chunks = chunk_document(lengths, cap)
        assert [i for c in chunks for i in c] == list(range(len(lengths)))
        for k, chunk in enumerate(chunks):
            size = sum(lengths[i] + 2 for i in chunk)
            assert size <= cap or len(chunk) == 1  # only a sentence longer than the cap exceeds it, alone
            if k + 1 < len(chunks):  # greedy: the next sentence would not have fitted
                assert size + lengths[chunks[k + 1][0]] + 2 > cap
    with pytest.raises(ValueError, match="at least 2"):
        chunk_document([3], 1)


def test_long_documents_are_read_in_chunks_of_whole_sentences(bilm):
    contexts = document_contexts(DOC, max_positions=14)  # positions 11 | 4 + 4 | 11
    assert [len(stream) for stream, _ in contexts] == [1, 2, 2, 1]
    assert [k for _, k in contexts] == [0, 0, 1, 0]
    assert contexts[2][0] == (tuple(DOC[1]), tuple(DOC[2]))
    with torch.inference_mode():
        layers, _ = context_layers(bilm, contexts[3:])
    alone = layers_of(bilm, [[DOC[3]]])[0][0]
    torch.testing.assert_close(torch.stack(layers)[:, 0], alone, atol=1e-6, rtol=1e-6)


def test_stream_batches_bound_padded_positions():
    lengths = [5, 100, 7, 30, 30, 2000, 1]
    groups = list(stream_batches(lengths, budget=64))
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for group in groups:
        assert len(group) * max(lengths[i] for i in group) <= 64 or len(group) == 1


def test_keys_name_the_whole_document_and_never_sentence_mode():
    keys = document_keys(DOC)
    assert keys == document_keys([list(s) for s in DOC]) and len(set(keys)) == len(DOC)
    neighbour_changed = document_keys([DOC[0], ["Someone", "else"], *DOC[2:]])
    assert all(a != b for a, b in zip(keys, neighbour_changed, strict=True))  # not only the sentence's own
    assert document_keys(DOC[:1] + DOC[1:]) == keys
    assert document_keys(DOC, max_positions=15) != keys  # other chunks, other context
    assert document_keys([DOC[0] + DOC[1], *DOC[2:]])[0] != keys[0]  # sentence breaks are part of it
    assert not {sentence_key(s) for s in DOC} & set(keys)
    assert document_keys([DOC[1]]) != [sentence_key(DOC[1])]  # one sentence: same layers, another key


def test_document_cache_serves_each_context_its_own_rows(tmp_path: Path, bilm):
    cache = LayerCache.for_bilm(tmp_path, bilm)
    docs = [DOC, OTHER, [DOC[1], ["Someone", "else"]]]  # DOC[1] in two contexts
    assert cache.fill(DOC, bilm) == len(DOC)  # sentence mode in the same folder
    assert fill_document_cache(cache, docs, bilm) == len(DOC) + len(OTHER) + 2
    assert fill_document_cache(cache, docs + [DOC], bilm) == 0  # all cached already
    reopened = LayerCache.for_bilm(tmp_path, bilm)  # published: checksums and index verified on open
    for document in docs:
        layers, mask = reopened.lookup_keys(document_keys(document))
        for b, ref in enumerate(layers_of(bilm, [document])[0]):
            n = ref.shape[1]
            assert mask[b].sum() == n
            torch.testing.assert_close(torch.stack(layers)[:, b, :n], ref.half().float(), atol=2e-3, rtol=0)
    in_doc, _ = reopened.lookup_keys(document_keys(docs[0])[1:2])
    in_other, _ = reopened.lookup_keys(document_keys(docs[2])[:1])
    sentence, _ = reopened.lookup([DOC[1]])
    assert not torch.equal(in_doc[1], in_other[1]) and not torch.equal(in_doc[1], sentence[1])
    with pytest.raises(KeyError, match="Peter Blackburn"):
        reopened.lookup_keys(document_keys([DOC[1], ["new"]])[:1], [DOC[1]])
