"""Numerical parity with the reference ELMo fixtures in ../shared/reference (docs/bilm_reference.md section 8)."""

import json

import h5py
import numpy as np
import pytest
import torch

from ner_app.bilm import batch_to_ids, load_bilm, remove_sentence_boundaries, token_to_ids
from ner_app.cli.commands import main
from tests.helpers import shared_path

FIXTURES = [("allennlp_elmo", "sentences.json"), ("bilm_tf_noskip", "lm_embeddings_sentences.json")]


def fixture(name: str, sentences_file: str):
    folder = shared_path("reference", name)
    sentences = json.loads((folder / sentences_file).read_text())
    expected = [h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    return folder, sentences, expected


def top_layers(bilm, batch):
    with torch.no_grad():
        out = bilm(batch_to_ids(batch))
    top, _ = remove_sentence_boundaries(out.layers[-1], out.mask)
    return top.numpy()


@pytest.mark.parametrize(("name", "sentences_file"), FIXTURES)
def test_stateful_top_layers_match_reference(name, sentences_file):
    folder, sentences, expected = fixture(name, sentences_file)
    bilm = load_bilm(folder / "options.json", folder / "lm_weights.hdf5", stateful=True).eval()
    for i in range(10):  # batch i = sentence i of lists 0, 1, 2, run in order through one model
        batch = [sentences[k][i].split() for k in range(3)]
        top = top_layers(bilm, batch)
        half = top.shape[-1] // 2
        for k, tokens in enumerate(batch):
            got = np.stack([top[k, : len(tokens), :half], top[k, : len(tokens), half:]])
            np.testing.assert_allclose(got, expected[k][str(i)][...], atol=1e-6, rtol=1e-5)


def test_stateless_differs_from_the_stateful_reference():
    # Guards the test above: resetting state per batch must not match (the doc: differences up to 2.6).
    folder, sentences, expected = fixture(*FIXTURES[0])
    bilm = load_bilm(folder / "options.json", folder / "lm_weights.hdf5").eval()
    batch = [sentences[k][5].split() for k in range(3)]
    top = top_layers(bilm, batch)
    half = top.shape[-1] // 2
    assert np.abs(top[0, : len(batch[0]), :half] - expected[0]["5"][0]).max() > 1e-2


def test_token_representations_match_reference():
    folder = shared_path("reference", "allennlp_elmo")
    words = (folder / "vocab_test.txt").read_text().split("\n")
    bilm = load_bilm(folder / "options.json", folder / "lm_weights.hdf5").eval()
    with torch.no_grad():
        got = bilm.token_encoder.embed_all(torch.tensor([token_to_ids(w) for w in words])).numpy()
    expected = h5py.File(folder / "elmo_token_embeddings.hdf5", "r")["embedding"][...]
    assert got.shape == expected.shape == (458, 16)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=1e-5)


def test_embed_command_stateful_matches_reference(tmp_path):
    folder, sentences, expected = fixture(*FIXTURES[0])
    # Lines in the fixture's batch order; batches of 3 in file order reproduce the reference protocol.
    lines = [sentences[k][i] for i in range(10) for k in range(3)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    code = main(
        [
            "embed",
            "--options",
            str(folder / "options.json"),
            "--weights",
            str(folder / "lm_weights.hdf5"),
            "--input",
            str(tmp_path / "in.txt"),
            "--output",
            str(tmp_path / "out.hdf5"),
            "--batch-size",
            "3",
            "--stateful",
        ]
    )
    assert code == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert len(out) == 30
        for line in range(30):
            i, k = divmod(line, 3)
            layers = out[str(line)][...]  # (L+1, n, 2P)
            assert layers.shape == (3, len(lines[line].split()), 32)
            got = np.stack([layers[-1, :, :16], layers[-1, :, 16:]])
            np.testing.assert_allclose(got, expected[k][str(i)][...], atol=1e-6, rtol=1e-5)
