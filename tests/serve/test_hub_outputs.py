"""TF-Hub ELMo's named outputs (ner_app/bilm/hub_outputs.py) against the biLM's own layers and oracles."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from ner_app.bilm import Elmo, ScalarMix, batch_to_ids, load_bilm, remove_sentence_boundaries
from ner_app.bilm.char_mapper import token_to_ids
from ner_app.bilm.document import context_layers, document_contexts
from ner_app.bilm.hub_outputs import HubElmo, hub_outputs_from_layers, hub_tokens, output_names
from ner_app.cli.commands import main
from tests.helpers import shared_path

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_bilm"
SENTENCES = [
    ["The", "EU", "rejects", "German", "call", "."],
    ["Peter", "Blackburn"],
    [],
    ["Zürich", "😀", "a", "a"],
]
NAMES = ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default")


@pytest.fixture
def bilm():
    return load_bilm(TINY / "options.json", TINY / "weights.hdf5").eval()


def hub(bilm, inputs, mix=None, sequence_len=None):
    with torch.inference_mode():
        return HubElmo(bilm, mix)(inputs, sequence_len)


def test_outputs_are_the_bilm_layers_exactly(bilm):
    weights = [0.3, -1.0, 0.8]
    out = hub(bilm, SENTENCES, weights)
    assert out.names == NAMES == output_names(2)
    with torch.no_grad():
        raw = bilm(batch_to_ids(SENTENCES))
        reference = Elmo(bilm, dropout=0.0, scalar_mix_parameters=weights)(batch_to_ids(SENTENCES))
    layers = [remove_sentence_boundaries(layer, raw.mask)[0] for layer in raw.layers]  # (B, T, 2P)
    assert out.word_emb.shape == (4, 6, 6) and out.elmo.shape == (4, 6, 12) and out.default.shape == (4, 12)
    assert torch.equal(out["lstm_outputs1"], layers[1]) and torch.equal(out["lstm_outputs2"], layers[2])
    assert torch.equal(out["elmo"], reference.representations[0])
    assert torch.equal(out.mask, reference.mask) and out.mask.dtype == torch.bool
    assert out.sequence_len.tolist() == [6, 2, 0, 4]
    for name in NAMES[:-1]:  # padding positions are exactly zero
        assert torch.count_nonzero(out[name][~out.mask]) == 0


def test_word_emb_is_one_half_of_layer_zero_and_the_token_representation(bilm):
    out = hub(bilm, SENTENCES)
    with torch.no_grad():
        raw = bilm(batch_to_ids(SENTENCES))
        layer0 = remove_sentence_boundaries(raw.layers[0], raw.mask)[0]  # (B, T, 2P) = [e; e]
        tokens = bilm.token_encoder.embed_all(torch.tensor([token_to_ids(t) for t in SENTENCES[0]]))  # (n, P)
    assert torch.equal(out.word_emb, layer0[..., :6]) and torch.equal(out.word_emb, layer0[..., 6:])
    torch.testing.assert_close(out.word_emb[0], tokens, atol=1e-6, rtol=1e-6)


def test_elmo_and_default_equal_the_mix_and_masked_mean_oracles(bilm):
    mix = ScalarMix(3, initial_scalar_parameters=[1.0, 0.0, -2.0])
    with torch.no_grad():
        mix.gamma.fill_(1.7)
    out = hub(bilm, SENTENCES, mix)
    with torch.no_grad():
        raw = bilm(batch_to_ids(SENTENCES))
    weights = torch.softmax(torch.tensor([1.0, 0.0, -2.0]), dim=0)
    for b, sentence in enumerate(SENTENCES):
        n = len(sentence)
        rows = [layer[b, 1 : n + 1] for layer in raw.layers]  # the sentence's tokens, (n, 2P) per layer
        elmo = 1.7 * sum(w * row for w, row in zip(weights.tolist(), rows, strict=True))
        torch.testing.assert_close(out.elmo[b, :n], elmo, atol=1e-6, rtol=1e-6)
        expected = elmo.mean(dim=0) if n else torch.zeros(12)  # an empty sentence's mean is 0
        torch.testing.assert_close(out.default[b], expected, atol=1e-6, rtol=1e-6)


def test_strings_and_tokens_give_identical_outputs(bilm):
    strings = ["The EU rejects German call .", "Peter  Blackburn ", "", "Zürich 😀 a a"]
    padded = [[*s, *[""] * (6 - len(s))] for s in SENTENCES]  # the "tokens" signature: "" padding + lengths
    assert hub_tokens(strings) == SENTENCES
    from_strings, from_tokens = hub(bilm, strings), hub(bilm, SENTENCES)
    from_padded = hub(bilm, padded, sequence_len=[len(s) for s in SENTENCES])
    for name in (*NAMES, "mask", "sequence_len"):
        assert torch.equal(from_strings[name], from_tokens[name])
        assert torch.equal(from_padded[name], from_tokens[name])
    # Without sequence_len the "" padding is read as real (empty) tokens, as the char mapper defines them.
    assert hub(bilm, padded).sequence_len.tolist() == [6, 6, 6, 6]


def test_a_sentence_alone_equals_it_in_a_batch(bilm):
    batched = hub(bilm, SENTENCES, [0.5, 0.1, -0.3])
    for b, sentence in enumerate(SENTENCES):
        alone = hub(bilm, [sentence], [0.5, 0.1, -0.3])
        n = len(sentence)
        for name in NAMES[:-1]:
            torch.testing.assert_close(batched[name][b, :n], alone[name][0], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(batched.default[b], alone.default[0], atol=1e-6, rtol=1e-6)


def test_wrong_calls_say_what_was_expected(bilm):
    with pytest.raises(ValueError, match="not one string"):
        hub_tokens("one sentence")
    with pytest.raises(ValueError, match="mix strings and token lists"):
        hub_tokens(["a b", ["a", "b"]])
    with pytest.raises(ValueError, match=r"sequence_len\[1\] = 3 is outside 0..2"):
        hub_tokens([["a"], ["b", "c"]], sequence_len=[1, 3])
    with pytest.raises(ValueError, match="a ScalarMix of 2 layers for a biLM of 3"):
        HubElmo(bilm, ScalarMix(2))
    with pytest.raises(KeyError, match="lstm_outputs3"):
        hub(bilm, [["a"]])["lstm_outputs3"]


def test_reference_fixture_through_the_hub_outputs():
    """lstm_outputs2 is the fixture's top layer (stateful protocol), word_emb its token representations."""
    folder = shared_path("reference", "allennlp_elmo")
    sentences = json.loads((folder / "sentences.json").read_text())
    vocab = {w: i for i, w in enumerate((folder / "vocab_test.txt").read_text().split("\n"))}
    tokens_expected = h5py.File(folder / "elmo_token_embeddings.hdf5", "r")["embedding"][...]  # (458, P)
    expected = [h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    model = HubElmo(load_bilm(folder / "options.json", folder / "lm_weights.hdf5", stateful=True).eval())
    for i in range(5):  # batch i = sentence i of lists 0, 1, 2, in order (5 of the 10 keep the test short)
        batch = [sentences[k][i] for k in range(3)]
        with torch.inference_mode():
            out = model(batch)  # untokenised strings: the "default" signature
        for k, sentence in enumerate(batch):
            words = sentence.split(" ")
            top = out["lstm_outputs2"][k, : len(words)].numpy()  # (n, 2P) = [forward; backward]
            got = np.stack([top[:, :16], top[:, 16:]])
            np.testing.assert_allclose(got, expected[k][str(i)][...], atol=1e-6, rtol=1e-5)
            rows = tokens_expected[[vocab[w] for w in words]]
            np.testing.assert_allclose(out.word_emb[k, : len(words)].numpy(), rows, atol=1e-6, rtol=1e-5)


LINES = ["The EU rejects German call .", "Peter Blackburn", "", "Zürich 😀 a a", "x  y"] + ["a b c"] * 5


def embed(tmp_path, *extra):
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    args = [
        "embed",
        "--options",
        str(TINY / "options.json"),
        "--weights",
        str(TINY / "weights.hdf5"),
        "--input",
        str(tmp_path / "in.txt"),
        "--output",
        str(tmp_path / "out.hdf5"),
        "--batch-size",
        "3",
    ]
    return main([*args, *extra])


def test_embed_outputs_all_writes_one_group_per_line(tmp_path, bilm):
    assert embed(tmp_path, "--outputs", "all", "--scalar-mix", "0.5,-1,2", "--gamma", "0.7") == 0
    mix = ScalarMix(3, initial_scalar_parameters=[0.5, -1.0, 2.0])
    with torch.no_grad():
        mix.gamma.fill_(0.7)
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert out.attrs["outputs"] == ",".join(NAMES) and out.attrs["context"] == "sentence"
        np.testing.assert_array_equal(out.attrs["scalar_mix_parameters"], np.float32([0.5, -1, 2]))
        assert sorted(out.keys(), key=int) == [str(i) for i in range(len(LINES))]
        for i, line in enumerate(LINES):
            tokens = line.split(" ") if line else []  # embed's reading: "x  y" has an empty middle token
            expected = hub(bilm, [tokens], mix)
            group = out[str(i)]
            assert sorted(group.keys()) == sorted(NAMES)
            assert group["word_emb"].shape == (len(tokens), 6) and group["default"].shape == (12,)
            for name in NAMES:
                assert group[name].dtype == np.float32
                want = expected[name][0] if name == "default" else expected[name][0, : len(tokens)]
                np.testing.assert_allclose(group[name][...], want.numpy(), atol=1e-6, rtol=1e-6)
        assert out["2"]["elmo"].shape == (0, 12) and not out["2"]["default"][...].any()


def test_embed_outputs_subset_and_document_context(tmp_path, bilm):
    assert embed(tmp_path, "--outputs", "default, lstm_outputs1", "--context", "document") == 0
    # The documents of the input: lines 0-1, line 3-9 (an empty line ends one); oracle: context_layers.
    documents = [[LINES[0].split(" "), LINES[1].split(" ")], [line.split(" ") for line in LINES[3:]]]
    with torch.no_grad():
        expected = []
        for document in documents:
            layers, mask = context_layers(bilm, document_contexts(document))
            expected.append(hub_outputs_from_layers(layers, mask, ScalarMix(3)))
    rows = [(0, 0), (0, 1), None, *[(1, k) for k in range(7)]]
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert out.attrs["outputs"] == "lstm_outputs1,default" and out.attrs["context"] == "document"
        for i, where in enumerate(rows):
            assert sorted(out[str(i)].keys()) == ["default", "lstm_outputs1"]
            if where is None:
                assert out[str(i)]["lstm_outputs1"].shape == (0, 12)
                continue
            d, b = where
            n = int(expected[d].sequence_len[b])
            for name in ("lstm_outputs1", "default"):
                want = expected[d][name][b] if name == "default" else expected[d][name][b, :n]
                np.testing.assert_allclose(out[str(i)][name][...], want.numpy(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--outputs", "elmo,lstm_outputs3"],
            "expected 'all' or a comma-separated subset of word_emb,"
            "lstm_outputs1,lstm_outputs2,elmo,default (unknown: lstm_outputs3)",
        ),
        (
            ["--outputs", "all", "--scalar-mix", "1,2"],
            "expected 3 finite numbers (one per biLM layer), found 2",
        ),
        (["--gamma", "2"], "--scalar-mix and --gamma go with --outputs (the default layout has no mix)"),
    ],
)
def test_embed_outputs_bad_arguments_are_one_line(tmp_path, capsys, extra, message):
    assert embed(tmp_path, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and err[0].endswith(message)
    assert not (tmp_path / "out.hdf5").exists()
