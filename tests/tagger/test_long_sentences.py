"""Sentences of any length: the char CNNs in chunks of words (equal to all at once), and the BiLSTM-CRF and the
biLM through a 20,000-token sentence (marked slow; the default run trains and decodes 2,000 tokens)."""

from __future__ import annotations

import random

import pytest
import torch

from ner_app.bilm.char_cnn import TokenEncoder
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.char_features import WordCharCNN
from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.features.chars import CharFeature
from ner_app.tagger.features.words import WordEmbedding
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.text.vocab import Vocab
from tests.helpers import random_bilm, vocab_spec

TAGS = ["O", "B-PER", "E-PER", "I-PER", "S-PER"]


def words(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices("abcdeXYZ.-", k=rng.randint(1, 12))) for _ in range(count)]


@pytest.mark.parametrize("chunk", [2, 5, 64])
def test_word_char_cnn_in_chunks_equals_all_at_once(monkeypatch, chunk):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cnn = WordCharCNN(40, 4, 6, 3)
    chars = torch.randint(0, 40, (7, 13, 9))
    chars[:, 10:] = 0  # padded positions
    chars[:, :, 6:] = 0  # padded characters
    monkeypatch.setattr(WordCharCNN, "chunk_words", None)
    with torch.no_grad():
        whole = cnn(chars)
    monkeypatch.setattr(WordCharCNN, "chunk_words", chunk)
    with torch.no_grad():
        chunked = cnn(chars)
    torch.testing.assert_close(chunked, whole, atol=1e-6, rtol=0)
    trained = cnn(chars)  # with autograd: one pass, whatever the chunk
    assert trained.requires_grad
    torch.testing.assert_close(trained.detach(), whole, atol=1e-6, rtol=0)


@pytest.mark.parametrize("chunk", [7, 1000])
def test_token_encoder_in_chunks_equals_all_at_once(monkeypatch, chunk):
    torch.set_num_threads(1)
    encoder = random_bilm().token_encoder
    ids = batch_to_ids([words(300)])[0]  # (300, 50)
    monkeypatch.setattr(TokenEncoder, "chunk_tokens", None)
    with torch.inference_mode():
        whole = encoder(ids)
    monkeypatch.setattr(TokenEncoder, "chunk_tokens", chunk)
    with torch.inference_mode():
        chunked = encoder(ids)
    assert chunked.shape == (300, encoder.output_dim)
    torch.testing.assert_close(chunked, whole, atol=1e-6, rtol=0)


@pytest.mark.parametrize("tokens", [2_000, pytest.param(20_000, marks=pytest.mark.slow)])
def test_tagger_trains_and_decodes_a_long_sentence(tokens):
    torch.set_num_threads(1)  # tiny per-step ops: threads only wait on each other (conftest restores them)
    sentence = words(tokens, seed=1)
    vocab = Vocab(sorted({w.lower() for w in sentence[:50]}), lowercase=True)
    chars = Vocab(sorted({c for w in sentence for c in w}))
    batch = encode_batch([sentence], vocab_spec(vocab, chars, TAGS, elmo=False), [["O"] * len(sentence)])
    torch.manual_seed(0)
    tagger = BiLstmCrfTagger(
        {"words": WordEmbedding(len(vocab), 4), "chars": CharFeature(len(chars), 3, 5, 3)},
        len(TAGS),
        lstm_hidden=4,
        lstm_layers=1,
        allowed=allowed_transitions(TAGS, "BIOES"),
    )
    loss = tagger.train().loss(batch)
    loss.backward()
    assert torch.isfinite(loss) and tagger.feature("chars").char_cnn.conv.weight.grad is not None
    decoded = tagger.eval().decode(batch)
    assert decoded.shape == (1, tokens)


@pytest.mark.slow
def test_bilm_reads_a_20000_token_sentence():
    """The biLM's LSTM runs step by step: 20,000 steps a direction and layer, in O(T) memory."""
    torch.set_num_threads(1)
    bilm = random_bilm()
    sentence = words(20_000, seed=2)
    with torch.inference_mode():
        out = bilm(batch_to_ids([sentence]))
        head = bilm(batch_to_ids([sentence[:20]]))
    assert [layer.shape for layer in out.layers] == [(1, 20_002, 12)] * 3
    assert all(torch.isfinite(layer).all() for layer in out.layers)
    # the forward LSTM has seen the same first 20 tokens: same rows
    torch.testing.assert_close(out.layers[1][0, :21, :6], head.layers[1][0, :21, :6], atol=1e-6, rtol=0)
