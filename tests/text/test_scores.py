"""``entity_scores`` gives exactly the numbers of seqeval's public functions (its report and its micro-averaged
precision, recall and F1), float for float, on random tag sequences of every shape the scorer meets and on
CoNLL-2003 dev with perturbed predictions."""

from __future__ import annotations

import random

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from ner_app.text.conll import read_conll
from ner_app.text.scores import GoldEntities, entity_scores
from tests.helpers import shared_path

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "S-MISC", "E-MISC", "I-MISC"]


def reference(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, object]:
    """The scores as seqeval's public functions give them."""
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    return {
        "precision": 100 * precision_score(gold, predicted, zero_division=0),
        "recall": 100 * recall_score(gold, predicted, zero_division=0),
        "f1": 100 * f1_score(gold, predicted, zero_division=0),
        "per_type": {
            name: {
                "precision": 100 * v["precision"],
                "recall": 100 * v["recall"],
                "f1": 100 * v["f1-score"],
                "support": int(v["support"]),
            }
            for name, v in report.items()
            if not name.endswith(" avg")
        },
    }


def perturbed(tags: list[list[str]], rng: random.Random, share: float) -> list[list[str]]:
    return [[rng.choice(TAGS) if rng.random() < share else t for t in sentence] for sentence in tags]


@pytest.mark.parametrize("seed", range(40))
def test_the_scores_are_seqevals_to_the_bit(seed: int) -> None:
    rng = random.Random(seed)
    gold = [[rng.choice(TAGS) for _ in range(rng.randint(1, 12))] for _ in range(rng.randint(1, 30))]
    predicted = perturbed(gold, rng, rng.choice([0.0, 0.1, 0.5, 1.0]))
    if seed % 5 == 0:  # a side without any entity: zero division everywhere
        predicted = [["O"] * len(s) for s in gold]
    assert entity_scores(gold, predicted) == reference(gold, predicted)


def test_the_scores_are_seqevals_on_conll2003_dev() -> None:
    gold = [list(s.tags) for s in read_conll(shared_path("data", "conll2003", "valid.txt"))]
    predicted = perturbed(gold, random.Random(0), 0.05)
    assert entity_scores(gold, predicted) == reference(gold, predicted)


def test_gold_entities_read_once_score_every_prediction_alike() -> None:
    """A training run reads its dev set's gold entities once and scores each epoch's predictions with them."""
    rng = random.Random(7)
    gold = [[rng.choice(TAGS) for _ in range(rng.randint(1, 12))] for _ in range(25)]
    entities = GoldEntities(gold)
    for share in (0.0, 0.2, 1.0):
        predicted = perturbed(gold, rng, share)
        assert entities.score(predicted) == reference(gold, predicted)
    with pytest.raises(ValueError) as err:
        entities.score(gold[:-1])
    assert str(err.value) == "entity_scores: every predicted sentence must be as long as its gold one"


def test_no_sentences_score_zero_with_no_types() -> None:
    """Where seqeval refuses an empty list, the scores are 0 and there are no types."""
    assert entity_scores([], []) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "per_type": {}}
