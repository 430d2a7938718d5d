"""The transformer feature's word vectors against Hugging Face's own hidden states, pooled by hand; windows
against a brute-force oracle; its mix against ELMo's; the hostile folders and words."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ner_app.bilm.elmo import Elmo
from ner_app.tagger.features.transformer import TransformerFeature
from ner_app.tagger.features.transformer_encoder import (
    TransformerError,
    central_windows,
    load_encoder,
    window_starts,
)
from tests.helpers import random_bilm
from tests.tagger.transformer.models import tiny_bert, tiny_roberta, transformers

SENTENCES = [
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
    ["Peter", "Blackburn"],
    ["the", "Thebe", "zzzzzzzz", ",", "Ünïcode", "straße"],
]
MAKERS = {"bert": tiny_bert, "roberta": tiny_roberta}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def folder(request, tmp_path_factory) -> Path:
    return MAKERS[request.param](tmp_path_factory.mktemp(request.param) / "model")


def reference(folder: Path, words: list[str], pooling: str) -> torch.Tensor:
    """Hugging Face's hidden states (L+1, n, D) of one sentence read alone, pooled by hand over word_ids."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    encoded = tokenizer([words], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        states = model(**encoded, output_hidden_states=True).hidden_states
    ids = encoded.word_ids(0)
    rows = []
    for w in range(len(words)):
        where = [i for i, owner in enumerate(ids) if owner == w]
        layer_rows = [s[0, where] for s in states]  # L+1 x (pieces, D)
        rows.append(torch.stack([r[0] if pooling == "first" else r.mean(0) for r in layer_rows]))
    return torch.stack(rows, dim=1)  # (L+1, n, D)


@pytest.mark.parametrize("pooling", ["first", "mean"])
def test_word_vectors_equal_hugging_face_hidden_states_pooled_by_hand(folder, pooling):
    encoder = load_encoder(folder, pooling, None)
    layers, mask = encoder.sentence_layers(SENTENCES)  # a batch: each sentence as if alone
    assert len(layers) == encoder.num_layers == 3 and mask.shape == (3, 11)
    for b, words in enumerate(SENTENCES):
        want = reference(folder, words, pooling)
        got = torch.stack([layer[b, 1 : 1 + len(words)] for layer in layers])
        assert torch.allclose(got, want, atol=1e-6, rtol=0), (got - want).abs().max()
        assert mask[b].sum() == len(words) + 2
        for layer in layers:  # the boundary rows and the padding are zero
            assert not layer[b, 0].any() and not layer[b, len(words) + 1 :].any()


def test_windows_cover_every_piece_and_give_it_the_nearest_centre():
    for pieces in range(1, 40):
        for window in range(1, 12):
            starts = window_starts(pieces, window)
            assert starts[0] == 0 and min(starts[-1] + window, pieces) == pieces
            assert all(b - a <= window // 2 or b - a <= 1 for a, b in zip(starts, starts[1:], strict=False))
            owner = central_windows(pieces, window, starts)
            for i, w in enumerate(owner):  # brute force: the nearest centre among the windows holding i
                holding = [k for k, s in enumerate(starts) if s <= i < s + window]
                distance = {
                    k: abs(i + 0.5 - (starts[k] + min(starts[k] + window, pieces)) / 2) for k in holding
                }
                best = min(distance.values())
                assert w == min(k for k in holding if distance[k] == best)


def test_long_sentences_read_in_windows_equal_the_oracle(folder):
    words = (SENTENCES[0] + SENTENCES[2]) * 3
    window = 7
    encoder = load_encoder(folder, "first", window)
    got = encoder.read([words])[0]  # (L+1, n, D)
    # the oracle: every window run by Hugging Face alone, each piece from its most central one
    tokenizer, model = encoder.tokenizer, encoder.model
    pieces = [encoder.word_pieces([w])[0] for w in words]
    flat = [p for w in pieces for p in w]
    starts = window_starts(len(flat), window)
    states = []
    for s in starts:
        ids = encoder.prefix + flat[s : s + window] + encoder.suffix
        with torch.no_grad():
            hidden = model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
        states.append(torch.stack(hidden)[:, 0, len(encoder.prefix) : len(encoder.prefix) + len(ids) - 2])
    owner = central_windows(len(flat), window, starts)
    first = [sum(map(len, pieces[:k])) for k in range(len(words))]
    want = torch.stack([states[owner[i]][:, i - starts[owner[i]]] for i in first], dim=1)
    assert len(starts) > 3
    assert torch.allclose(got, want, atol=1e-6, rtol=0)
    del tokenizer


def test_a_sentence_that_fits_reads_the_same_whatever_the_window(folder):
    words = SENTENCES[0]
    pieces = sum(len(p) for p in load_encoder(folder, "mean", None).word_pieces(words))
    one_pass = load_encoder(folder, "mean", None).read([words])[0]
    exact = load_encoder(folder, "mean", pieces).read([words])[0]  # the window is the sentence
    assert torch.allclose(one_pass, exact, atol=1e-6, rtol=0)
    assert torch.allclose(one_pass, reference(folder, words, "mean"), atol=1e-6, rtol=0)


def test_a_2000_word_sentence_is_read_in_windows(folder):
    words = (["the", "german", "call"] * 667)[:2000]
    layers, mask = load_encoder(folder, "first", None).sentence_layers([words, ["lamb"]])
    assert layers[0].shape[:2] == (2, 2002) and int(mask[0].sum()) == 2002
    assert torch.isfinite(torch.stack(layers)).all()


def test_words_without_pieces_read_as_the_unknown_piece(folder):
    encoder = load_encoder(folder, "first", None)
    words = ["the", "", "\u200b", "lamb"]
    pieces = encoder.word_pieces(words)
    assert pieces[1] == [encoder.unk] and all(pieces)  # the empty word; every word has a piece
    if encoder.tokenizer.unk_token == "[UNK]":  # BERT's normaliser drops a zero-width space (bytes: RoBERTa)
        assert pieces[2] == [encoder.unk]
    layers, mask = encoder.sentence_layers([words])
    assert int(mask.sum()) == 6 and torch.isfinite(layers[-1]).all()


def test_the_mix_is_elmos_mix_on_the_same_layers(folder):
    encoder = load_encoder(folder, "first", None)
    layers, mask = encoder.sentence_layers(SENTENCES)
    feature = TransformerFeature(encoder).eval()
    elmo = Elmo(random_bilm(), 1, dropout=0.0).eval()  # ELMo's mix module, fed the transformer's layers
    weights, gamma = torch.tensor([0.3, -1.0, 0.7]), torch.tensor([1.7])
    with torch.no_grad():  # the same non-uniform weights in both mixes
        for mix in (elmo.scalar_mixes[0], feature.transformer_mix):
            mix.scalar_parameters.copy_(weights)
            mix.gamma.copy_(gamma)
    ours = feature({"layers": layers, "mask": mask}).input  # (B, T, D)
    theirs = elmo.mix(layers, mask).representations[0]  # (B, T, D)
    assert torch.equal(ours, theirs)
    assert type(feature.transformer_mix) is type(elmo.scalar_mixes[0])  # one class: the paper's ScalarMix
    assert torch.equal(feature.l2_penalty(), elmo.l2_penalty())


def test_the_cache_layout_round_trips_through_document_streams(folder):
    encoder = load_encoder(folder, "first", None)
    alone = encoder.stream_layers([(tuple(SENTENCES[0]),)])[0][0]  # a one-sentence stream is the sentence
    layers, _ = encoder.sentence_layers([SENTENCES[0]])
    assert torch.equal(alone, torch.stack([layer[0] for layer in layers]))
    two = encoder.stream_layers([(tuple(SENTENCES[0]), tuple(SENTENCES[1]))])[0]
    assert [r.shape[1] for r in two] == [len(SENTENCES[0]) + 2, len(SENTENCES[1]) + 2]
    assert not torch.equal(
        two[1], torch.stack([layer[0] for layer in encoder.sentence_layers([SENTENCES[1]])[0]])
    )


# ----------------------------------------------------------------------------------------- hostile folders
def test_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(TransformerError, match="not a folder"):
        load_encoder(tmp_path / "absent", "first", None)


def test_a_folder_without_weights_or_tokenizer_is_refused(tmp_path):
    src = tiny_bert(tmp_path / "bert")
    (src / "model.safetensors").unlink()
    with pytest.raises(TransformerError, match="no model.safetensors"):
        load_encoder(src, "first", None)
    other = tiny_bert(tmp_path / "bert2")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (other / name).unlink()
    with pytest.raises(TransformerError, match="no tokenizer"):
        load_encoder(other, "first", None)


def test_a_pickled_checkpoint_is_never_loaded(tmp_path):
    src = tiny_bert(tmp_path / "bert")
    (src / "model.safetensors").rename(src / "pytorch_model.bin")
    with pytest.raises(TransformerError, match="pickle"):
        load_encoder(src, "first", None)


def test_a_tokenizer_of_another_model_is_refused(tmp_path):
    bert = tiny_bert(tmp_path / "bert")
    roberta = tiny_roberta(tmp_path / "roberta")  # 260 pieces against BERT's 90 rows
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bert / name).write_bytes((roberta / name).read_bytes())
    with pytest.raises(TransformerError, match="not one model's"):
        load_encoder(bert, "first", None)


def test_a_window_beyond_the_encoder_is_refused(tmp_path):
    src = tiny_bert(tmp_path / "bert")  # 64 positions, 2 special pieces
    with pytest.raises(TransformerError, match="1 to 62"):
        load_encoder(src, "first", 63)
