"""The BiLSTM-CRF tagger: invariances, the frozen GloVe rows, the ELMo penalty, ELMo at the output, mixed
precision."""

import pytest
import torch

from ner_app.bilm import Elmo
from ner_app.tagger import char_features
from ner_app.tagger.batch import encode_batch, full_steps, row_lengths
from ner_app.tagger.char_features import WordCharCNN
from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.features.chars import CharFeature
from ner_app.tagger.features.elmo import ElmoFeature
from ner_app.tagger.features.words import WordEmbedding
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.text.vocab import Vocab
from tests.helpers import random_bilm, vocab_spec

TAGS = ["O", "B-PER", "E-PER", "I-PER", "S-PER", "B-LOC", "E-LOC", "I-LOC", "S-LOC"]
SENTENCES = [["Alice", "Smith", "flew", "to", "Paris", "."], ["Bob", "ran"], ["x"]]


def make_tagger(
    elmo: bool = True, frozen_words: int = 0, seed: int = 0, at_output: bool = False
) -> BiLstmCrfTagger:
    torch.manual_seed(seed)
    mixes = 2 if at_output else 1
    features = {"words": WordEmbedding(20, 6, frozen_words), "chars": CharFeature(30, 4, 5, 3)}
    if elmo:
        features["elmo"] = ElmoFeature(Elmo(random_bilm(), mixes, dropout=0.0), at_output)
    return BiLstmCrfTagger(
        features,
        num_tags=len(TAGS),
        lstm_hidden=7,
        lstm_layers=2,
        dropout=0.5,
        allowed=allowed_transitions(TAGS, "BIOES"),
    ).eval()


def batch_of(sentences, words=None):
    words = words or Vocab(sorted({w.lower() for s in SENTENCES for w in s}), lowercase=True)
    chars = Vocab(sorted({c for s in SENTENCES for w in s for c in w}))
    tags = [["O"] * len(s) for s in sentences]
    return encode_batch(sentences, vocab_spec(words, chars, TAGS), tags=tags)


@pytest.mark.parametrize("at_output", [False, True])
def test_sentence_alone_equals_sentence_in_padded_batch(at_output: bool):
    tagger = make_tagger(at_output=at_output)
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


def _repeated_chars() -> torch.Tensor:
    """(4, 9, 6) char ids: words drawn from five, so that rows repeat, and padded positions."""
    torch.manual_seed(3)
    vocab = torch.randint(1, 10, (5, 6))
    vocab[:, 4:] = 0  # padded characters
    chars = vocab[torch.randint(0, 5, (4, 9))]  # (4, 9, 6)
    chars[1:, 7:] = 0  # padded positions
    return chars


def test_char_cnn_computes_each_distinct_row_once_with_the_same_bits(monkeypatch):
    monkeypatch.setattr(char_features, "DISTINCT_MIN_WORK", 0)
    torch.manual_seed(0)
    cnn = WordCharCNN(10, 4, 5, 3)
    chars = _repeated_chars()
    flat = chars.reshape(-1, 6)  # (36, 6)
    assert len(torch.unique(flat, dim=0)) < 8  # what the test is about: most rows repeat
    seen: list[int] = []
    cnn.words = lambda rows: (seen.append(len(rows)), WordCharCNN.words(cnn, rows))[1]  # type: ignore[method-assign]
    out = cnn(chars)  # (4, 9, 5)
    assert seen == [len(torch.unique(flat, dim=0))]
    assert torch.equal(out, WordCharCNN.words(cnn, flat).reshape(4, 9, 5))  # every position, bit for bit
    with torch.no_grad():
        assert torch.equal(cnn(chars), out.detach())


def test_char_cnn_gradients_of_distinct_rows_equal_those_of_every_position(monkeypatch):
    monkeypatch.setattr(char_features, "DISTINCT_MIN_WORK", 0)
    torch.manual_seed(0)
    cnn = WordCharCNN(10, 4, 5, 3)
    chars = _repeated_chars()
    weight = torch.randn(4, 9, 5)
    (cnn(chars) * weight).sum().backward()
    distinct = [p.grad.clone() for p in cnn.parameters()]
    cnn.zero_grad()
    (cnn.words(chars.reshape(-1, 6)).reshape(4, 9, 5) * weight).sum().backward()
    for got, expected in zip(distinct, [p.grad for p in cnn.parameters()], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
    traced = torch.jit.trace(cnn, (chars,), check_trace=False)  # what the ONNX export traces: the same
    assert "unique" in str(traced.graph)
    other = _repeated_chars()[:, :5]  # another batch through the traced graph
    assert torch.equal(traced(other), cnn.words(other.reshape(-1, 6)).reshape(4, 5, 5))


def test_char_cnn_distinct_rows_under_bf16_autocast_are_float32_with_the_same_values(monkeypatch):
    """Under autocast the features are bf16; the distinct rows come back float32 (what the model's concatenation
    makes of them), so that a word's positions sum their gradients in float32."""
    monkeypatch.setattr(char_features, "DISTINCT_MIN_WORK", 0)
    torch.manual_seed(0)
    cnn = WordCharCNN(10, 4, 5, 3)
    chars = _repeated_chars()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        distinct = cnn(chars)
        every = cnn.words(chars.reshape(-1, 6)).reshape(4, 9, 5)
    assert distinct.dtype == torch.float32 and every.dtype == torch.bfloat16
    assert torch.equal(distinct, every.float())


def test_char_cnn_computes_every_position_of_a_batch_too_small_to_pay_for_the_search():
    cnn = WordCharCNN(10, 4, 5, 3)
    seen: list[int] = []
    cnn.words = lambda rows: (seen.append(len(rows)), WordCharCNN.words(cnn, rows))[1]  # type: ignore[method-assign]
    cnn(_repeated_chars())  # 36 positions x 5 filters, below DISTINCT_MIN_WORK
    assert seen == [36]
    assert torch.jit.trace(cnn, (_repeated_chars(),), check_trace=False).graph.findNode("aten::unique_dim")


def test_frozen_word_rows_are_looked_up_but_never_trained():
    tagger = make_tagger(elmo=False, frozen_words=4)
    vectors = torch.randn(24, 6)
    tagger.feature("words").init_word_embeddings(vectors)
    words = torch.tensor([[1, 19, 20, 23]])
    torch.testing.assert_close(tagger.feature("words").embed_words(words)[0], vectors[[1, 19, 20, 23]])
    tagger.train()
    tagger.feature("words").embed_words(words).sum().backward()
    assert "frozen_word_vectors" in dict(tagger.feature("words").named_buffers())
    assert tagger.feature("words").word_embed.weight.grad[[1, 19]].abs().sum() > 0


def test_loss_adds_lambda_times_mix_penalty():
    tagger = make_tagger()
    with torch.no_grad():
        tagger.feature("elmo").elmo.scalar_mixes[0].scalar_parameters.copy_(torch.tensor([0.5, -1.0, 2.0]))
    batch = batch_of(SENTENCES)
    difference = tagger.loss(batch, l2_coef=0.1) - tagger.loss(batch, l2_coef=0.0)
    torch.testing.assert_close(difference, torch.tensor(0.1 * (0.25 + 1.0 + 4.0)))


def test_loss_trains_tagger_and_mix_but_not_bilm():
    tagger = make_tagger().train()
    tagger.loss(batch_of(SENTENCES), l2_coef=0.1).backward()
    mix = tagger.feature("elmo").elmo.scalar_mixes[0]
    assert mix.scalar_parameters.grad is not None and mix.gamma.grad is not None
    assert all(p.grad is None for p in tagger.feature("elmo").elmo.bilm.parameters())
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


# ------------------------------------------------------------------------------ ELMo at the output
def test_output_mix_enters_only_the_output_layer():
    """emissions = W dropout([h_k; ELMo_k^task]): the output layer reads 2H + 2P features, and changing the
    output mix's weights changes the emissions while the BiLSTM's input stays the same."""
    tagger = make_tagger(at_output=True)
    assert tagger.output.in_features == 2 * 7 + tagger.feature("elmo").elmo.output_dim
    batch = batch_of(SENTENCES)
    before = tagger.emissions(batch)
    inputs = tagger.feature("elmo").representations(batch["features"]["elmo"])[0]
    with torch.no_grad():
        tagger.feature("elmo").elmo.scalar_mixes[1].scalar_parameters.copy_(torch.tensor([3.0, -2.0, 0.0]))
        tagger.feature("elmo").elmo.scalar_mixes[1].gamma.fill_(2.0)
    assert not torch.allclose(tagger.emissions(batch), before)
    torch.testing.assert_close(
        tagger.feature("elmo").representations(batch["features"]["elmo"])[0], inputs
    )  # the input mix is untouched


def test_output_mix_is_trained_and_penalised_like_the_input_mix():
    tagger = make_tagger(at_output=True).train()
    batch = batch_of(SENTENCES)
    tagger.loss(batch, l2_coef=0.1).backward()
    for mix in tagger.feature("elmo").elmo.scalar_mixes:
        assert mix.scalar_parameters.grad is not None and mix.scalar_parameters.grad.abs().sum() > 0
        assert mix.gamma.grad is not None
    assert all(p.grad is None for p in tagger.feature("elmo").elmo.bilm.parameters())
    with torch.no_grad():
        for mix in tagger.feature("elmo").elmo.scalar_mixes:
            mix.scalar_parameters.copy_(torch.tensor([1.0, 0.0, -1.0]))
    tagger.eval()
    difference = tagger.loss(batch, l2_coef=0.1) - tagger.loss(batch, l2_coef=0.0)
    torch.testing.assert_close(difference, torch.tensor(0.1 * 2 * 2.0))  # both mixes' ||w||^2


def test_output_mix_needs_a_second_mix():
    with pytest.raises(ValueError, match="two mixes"):
        ElmoFeature(Elmo(random_bilm(), 1), at_output=True)


def test_decode_scored_is_the_best_allowed_path_and_its_marginals():
    """Prediction's decode (``decode_scored``) against brute force over every allowed path of the emissions:
    the best path, 0 at padding, and each chosen tag's marginal probability."""
    from tests.tagger.test_crf import oracle

    tagger = make_tagger()
    sentences = [["Alice", "Smith", "flew", "to"], ["Bob", "ran"], ["x"]]
    batch = batch_of(sentences)
    with torch.inference_mode():
        paths, chosen = tagger.decode_scored(batch)
    with torch.no_grad():
        emissions = tagger.emissions(batch)
    assert chosen.dtype == torch.float32 and paths.shape == chosen.shape == batch["mask"].shape
    assert torch.equal(paths, tagger.decode(batch))
    allowed = allowed_transitions(TAGS, "BIOES")
    for b, sentence in enumerate(sentences):
        n = len(sentence)
        _, best, _, marginals = oracle(tagger.crf, emissions[b], n, allowed)
        assert paths[b, :n].tolist() == list(best) and not paths[b, n:].any()
        expected = marginals[torch.arange(n), torch.tensor(best)]
        torch.testing.assert_close(chosen[b, :n].double(), expected, atol=1e-5, rtol=1e-5)
        assert not chosen[b, n:].any()


def test_lengths_come_from_the_tokens_on_the_host_and_equal_the_masks():
    """The model reads each row's length from the batch's tokens (no wait for the device) and the shortest
    one as the CRF's ``full_steps``; a batch without tokens (the ONNX graph's) counts its mask, and its loss,
    paths and scores are the same."""
    tagger = make_tagger()
    batch = batch_of(SENTENCES)
    assert row_lengths(batch).tolist() == batch["mask"].sum(dim=1).tolist() == [6, 2, 1]
    assert row_lengths(batch).device.type == "cpu" and full_steps(batch) == 1
    assert full_steps(batch_of(SENTENCES[:2])) == 2
    bare = {k: v for k, v in batch.items() if k not in ("tokens", "partial")}
    assert full_steps(bare) == 0 and row_lengths(bare).tolist() == [6, 2, 1]
    with torch.no_grad():
        assert torch.equal(tagger.loss(batch), tagger.loss(bare))
        assert torch.equal(tagger.decode(batch), tagger.decode(bare))
        assert torch.equal(tagger.emissions(batch), tagger.emissions(bare))
