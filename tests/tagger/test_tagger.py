"""The BiLSTM-CRF tagger: invariances, the frozen GloVe rows, the ELMo penalty, mixed precision."""

import torch

from ner_app.bilm import Elmo
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.char_features import WordCharCNN
from ner_app.tagger.constraints import allowed_transitions
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.text.vocab import Vocab
from tests.helpers import random_bilm

TAGS = ["O", "B-PER", "E-PER", "I-PER", "S-PER", "B-LOC", "E-LOC", "I-LOC", "S-LOC"]
SENTENCES = [["Alice", "Smith", "flew", "to", "Paris", "."], ["Bob", "ran"], ["x"]]


def make_tagger(elmo: bool = True, frozen_words: int = 0, seed: int = 0) -> BiLstmCrfTagger:
    torch.manual_seed(seed)
    return BiLstmCrfTagger(
        num_words=20, num_chars=30, num_tags=len(TAGS), word_dim=6, char_dim=4, char_filters=5, lstm_hidden=7,
        lstm_layers=2, dropout=0.5, elmo=Elmo(random_bilm(), dropout=0.0) if elmo else None,
        allowed=allowed_transitions(TAGS, "BIOES"), frozen_words=frozen_words,
    ).eval()  # fmt: skip


def batch_of(sentences, words=None):
    words = words or Vocab(sorted({w.lower() for s in SENTENCES for w in s}), lowercase=True)
    chars = Vocab(sorted({c for s in SENTENCES for w in s for c in w}))
    tag_vocab = Vocab(TAGS, specials=False)
    tags = [["O"] * len(s) for s in sentences]
    return encode_batch(sentences, words, chars, tags=tags, tag_vocab=tag_vocab)


def test_sentence_alone_equals_sentence_in_padded_batch():
    tagger = make_tagger()
    batched = tagger.emissions(batch_of(SENTENCES))
    decoded = tagger.decode(batch_of(SENTENCES))
    for i, sentence in enumerate(SENTENCES):
        alone = tagger.emissions(batch_of([sentence]))
        torch.testing.assert_close(batched[i, : len(sentence)], alone[0], atol=1e-5, rtol=1e-5)
        assert torch.equal(decoded[i, : len(sentence)], tagger.decode(batch_of([sentence]))[0])


def test_char_cnn_ignores_padding_characters():
    cnn = WordCharCNN(10, 4, 5, 3)
    short = torch.tensor([[[3, 4, 0, 0, 0]]])
    torch.testing.assert_close(cnn(short), cnn(short[..., :2]))


def test_frozen_word_rows_are_looked_up_but_never_trained():
    tagger = make_tagger(elmo=False, frozen_words=4)
    vectors = torch.randn(24, 6)
    tagger.init_word_embeddings(vectors)
    words = torch.tensor([[1, 19, 20, 23]])
    torch.testing.assert_close(tagger.embed_words(words)[0], vectors[[1, 19, 20, 23]])
    tagger.train()
    tagger.embed_words(words).sum().backward()
    assert "frozen_word_vectors" in dict(tagger.named_buffers())
    assert tagger.word_embed.weight.grad[[1, 19]].abs().sum() > 0


def test_loss_adds_lambda_times_mix_penalty():
    tagger = make_tagger()
    with torch.no_grad():
        tagger.elmo.scalar_mixes[0].scalar_parameters.copy_(torch.tensor([0.5, -1.0, 2.0]))
    batch = batch_of(SENTENCES)
    difference = tagger.loss(batch, l2_coef=0.1) - tagger.loss(batch, l2_coef=0.0)
    torch.testing.assert_close(difference, torch.tensor(0.1 * (0.25 + 1.0 + 4.0)))


def test_loss_trains_tagger_and_mix_but_not_bilm():
    tagger = make_tagger().train()
    tagger.loss(batch_of(SENTENCES), l2_coef=0.1).backward()
    mix = tagger.elmo.scalar_mixes[0]
    assert mix.scalar_parameters.grad is not None and mix.gamma.grad is not None
    assert all(p.grad is None for p in tagger.elmo.bilm.parameters())
    assert tagger.crf.transitions.grad is not None and tagger.lstm[0].weight_ih_l0.grad is not None


def test_bf16_autocast_keeps_crf_in_fp32():
    tagger = make_tagger()
    batch = batch_of(SENTENCES)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = tagger.loss(batch)
        tags = tagger.decode(batch)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert tags.shape == (3, 6)


def test_dropout_keeps_expectation_and_rate():
    from ner_app.tagger.dropout import RandMaskDropout

    torch.manual_seed(0)
    drop = RandMaskDropout(0.5).train()
    y = drop(torch.ones(200_000))
    assert set(y.unique().tolist()) == {0.0, 2.0}
    assert abs((y == 0).float().mean().item() - 0.5) < 0.01
    assert torch.equal(drop.eval()(torch.ones(5)), torch.ones(5))
