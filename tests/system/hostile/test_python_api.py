"""The Python API called with wrong types or values: each is a ``TypeError`` or ``ValueError`` at the call,
naming the argument and what was expected, never an error from deep inside (docs/python_api.md#errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ner_app
from tests.helpers import TINY_BILM

NAMES = "^"  # each message starts with the name of the argument it is about


@pytest.fixture(scope="module")
def tagger(trained: Path) -> ner_app.Tagger:
    return ner_app.load_tagger(trained / "export")


@pytest.fixture(scope="module")
def embedder() -> ner_app.Embedder:
    return ner_app.load_bilm(TINY_BILM)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda t: t.predict("abc"),
            TypeError,
            r"texts: predict takes a list of texts, found a string; use predict_text",
        ),
        (lambda t: t.predict(b"abc"), TypeError, r"texts: expected a list of texts \(strings\), found bytes"),
        (lambda t: t.predict([b"x"]), TypeError, r"texts\[0\]: expected a string, found bytes"),
        (lambda t: t.predict(["ok", 1]), TypeError, r"texts\[1\]: expected a string, found int"),
        (
            lambda t: t.predict(None),
            TypeError,
            r"texts: expected a list of texts \(strings\), found NoneType",
        ),
        (lambda t: t.predict(5), TypeError, r"texts: expected a list of texts \(strings\), found int"),
        (lambda t: t.predict_text(b"Alice"), TypeError, r"text: expected a string, found bytes"),
        (lambda t: t.predict_text(["Alice"]), TypeError, r"text: expected a string, found list"),
        (
            lambda t: t.tag("abc"),
            TypeError,
            r"sentences: expected a list of sentences, each a list of token strings, found a string",
        ),
        (
            lambda t: t.tag(["Alice", "flew"]),
            TypeError,
            r"sentences\[0\]: expected a list of token strings, found a string",
        ),
        (
            lambda t: t.tag([["Alice", 3]]),
            TypeError,
            r"sentences\[0\]\[1\]: expected a token string, found int",
        ),
        (
            lambda t: t.tag([[b"Alice"]]),
            TypeError,
            r"sentences\[0\]\[0\]: expected a token string, found bytes",
        ),
        (
            lambda t: t.tag([None]),
            TypeError,
            r"sentences\[0\]: expected a list of token strings, found NoneType",
        ),
        (lambda t: t.tag(None), TypeError, r"sentences: expected a list of sentences"),
        (
            lambda t: t.tag([["Alice", ""]]),
            ValueError,
            r"sentences\[0\]\[1\]: expected a token without whitespace, found ''",
        ),
        (
            lambda t: t.tag([["New York"]]),
            ValueError,
            r"sentences\[0\]\[0\]: expected a token without whitespace, found 'New York'",
        ),
    ],
)
def test_tagger_calls_with_wrong_types_name_the_argument(tagger, call, error, message):
    with pytest.raises(error, match=NAMES + message):
        call(tagger)


def test_the_right_calls_still_work(tagger):
    """The checks refuse only what is wrong: a generator of texts, tuples of tokens, an empty list."""
    assert tagger.predict(t for t in ["Alice Smith flew to Paris."]) == tagger.predict(
        ["Alice Smith flew to Paris."]
    )
    assert tagger.tag((("Alice", "Smith"),)) == tagger.tag([["Alice", "Smith"]])
    assert tagger.predict([]) == [] and tagger.tag([]) == [] and tagger.tag([[]]) == [[]]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, r"batch_size: expected an integer >= 1, found 0"),
        ({"batch_size": -3}, ValueError, r"batch_size: expected an integer >= 1, found -3"),
        ({"batch_size": "8"}, TypeError, r"batch_size: expected an integer >= 1, found a string '8'"),
        ({"batch_size": 2.5}, TypeError, r"batch_size: expected an integer >= 1, found float 2.5"),
        ({"batch_size": True}, TypeError, r"batch_size: expected an integer >= 1, found bool"),
        ({"path": 42}, TypeError, r"path: expected a folder path \(str or pathlib.Path\) or None, found int"),
        ({"path": b"runs/x"}, TypeError, r"path: expected a folder path .* found bytes"),
        ({"device": "gpu"}, ValueError, r"device: expected 'cpu', 'cuda' or 'cuda:N', found 'gpu'"),
        ({"device": 0}, TypeError, r"device: expected 'cpu' or 'cuda' \(a string\), found int"),
    ],
)
def test_load_tagger_with_wrong_arguments_names_them(trained, kwargs, error, message):
    with pytest.raises(error, match=NAMES + message):
        ner_app.load_tagger(**{"path": trained / "export", **kwargs})


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda e: e.embed("abc"),
            TypeError,
            r"sentences: expected a list of sentences \(strings or lists of token strings\), found a string",
        ),
        (lambda e: e.embed([1]), TypeError, r"sentences\[0\]: expected a list of token strings, found int"),
        (
            lambda e: e.embed([["a", None]]),
            TypeError,
            r"sentences\[0\]\[1\]: expected a token string, found NoneType",
        ),
        (
            lambda e: e.embed([["a", " "]]),
            ValueError,
            r"sentences\[0\]\[1\]: expected a token without whitespace",
        ),
        (
            lambda e: e.embed(["a"], batch_size=0),
            ValueError,
            r"batch_size: expected an integer >= 1, found 0",
        ),
        (
            lambda e: e.embed(["a"], precision="fp16"),
            ValueError,
            r"precision: expected 'fp32' or 'bf16', found 'fp16'",
        ),
    ],
)
def test_embedder_calls_with_wrong_types_name_the_argument(embedder, call, error, message):
    with pytest.raises(error, match=NAMES + message):
        call(embedder)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"path": 3.5}, TypeError, r"path: expected a folder path"),
        ({"device": "tpu"}, ValueError, r"device: expected 'cpu', 'cuda' or 'cuda:N', found 'tpu'"),
    ],
)
def test_load_bilm_with_wrong_arguments_names_them(kwargs, error, message):
    with pytest.raises(error, match=NAMES + message):
        ner_app.load_bilm(**{"path": TINY_BILM, **kwargs})


def test_cuda_without_a_gpu_is_one_clear_error(trained):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(ValueError, match=r"device='cuda': torch .* sees no CUDA device here; use 'cpu'"):
        ner_app.load_tagger(trained / "export", device="cuda")
