"""``predict`` and ``evaluate`` under a token budget: the same tags and scores as without one, long sentences
included; a bad --max-tokens is one clear line."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ner_app.bilm.weights import bilm_fingerprint
from ner_app.cli.commands import main
from ner_app.predict.predictor import PREDICT_MAX_TOKENS, Predictor
from ner_app.tagger.batch import Batch
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import ElmoRef, TaggerSizes, TaggerSpec
from ner_app.train.corpus import load_corpus
from tests.helpers import random_bilm

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_conll"
SIZES = TaggerSizes(
    word_dim=4, char_dim=3, char_filters=5, char_width=3, lstm_hidden=4, lstm_layers=1, dropout=0.0
)


def tagger_and_spec(context: str | None) -> tuple[BiLstmCrfTagger, TaggerSpec]:
    """A freshly initialised tagger of the tiny corpus (with a tiny biLM read in ``context``, or without)."""
    corpus = load_corpus(str(TINY), None, "BIOES")
    train = corpus.splits["train"]
    bilm = random_bilm() if context else None
    ref = None
    if bilm is not None and context is not None:
        ref = ElmoRef(
            "options.json",
            "weights.hdf5",
            bilm_fingerprint(bilm),
            0.0,
            False,
            context=context,
            max_stream_positions=80,
        )
    spec = TaggerSpec.from_training_data(
        SIZES, train.tokens, train.tags, corpus.scheme, corpus.source_scheme, elmo=ref
    )
    torch.manual_seed(0)
    return BiLstmCrfTagger.from_spec(spec, {"elmo": bilm} if bilm is not None else None).eval(), spec


def sentences() -> tuple[list[list[str]], list[int]]:
    rng = random.Random(0)
    vocab = ["Paris", "Alice", "met", "Bob", "in", "Berlin", ".", "Acme", "Corp", "the"]
    lengths = [3, 12, 1, 700, 40, 5, 260, 8, 2, 30]  # 700 and 260: tagged in pieces of at most 250
    tokens = [[rng.choice(vocab) for _ in range(n)] for n in lengths]
    return tokens, [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("context", [None, "sentence", "document"])
def test_predict_under_a_budget_equals_no_budget(context):
    torch.set_num_threads(1)
    tagger, spec = tagger_and_spec(context)
    tokens, documents = sentences()
    shapes: list[tuple[int, ...]] = []

    def results(max_tokens: int | None) -> list[tuple[list[str], list[float]]]:
        predictor = Predictor(tagger, spec, batch_size=6, max_tokens=max_tokens)
        batches = predictor.piece_batches

        def observed(pieces: Any, documents: Any) -> Iterator[tuple[list[int], Batch]]:
            for group, batch in batches(pieces, documents):
                shapes.append(tuple(batch["mask"].shape))
                yield group, batch

        predictor.piece_batches = observed  # type: ignore[method-assign]
        return predictor.tag(tokens, documents)

    free = results(None)
    assert max(b * t for b, t in shapes) > 300  # without a budget, a batch holds a 250-token piece and more
    shapes.clear()
    bounded = results(300)
    assert all(b == 1 or b * t <= 300 for b, t in shapes), shapes
    assert [len(t) for t, _ in bounded] == [len(s) for s in tokens]
    for (tags_a, scores_a), (tags_b, scores_b) in zip(free, bounded, strict=True):
        assert tags_a == tags_b
        # another batch is other float rounding in the LSTM's matmuls, summed over hundreds of CRF steps
        torch.testing.assert_close(torch.tensor(scores_a), torch.tensor(scores_b), atol=1e-4, rtol=0)
    assert results(PREDICT_MAX_TOKENS) == free  # the default splits no batch of 6 pieces: the same batches


@pytest.mark.parametrize("command", ["predict", "evaluate"])
@pytest.mark.parametrize("bad", ["0", "-3", "1.5", "many"])
def test_bad_max_tokens_is_one_clear_line(capsys, command, bad):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--input", str(TINY / "valid.txt"), "--max-tokens", bad])
    assert exit_.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(err) == 1 and "argument --max-tokens: expected an integer >= 1" in err[0], err
