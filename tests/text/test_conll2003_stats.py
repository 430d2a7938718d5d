"""The official CoNLL-2003 statistics, checked on the real files (skipped when they are not there)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from ner_app.text.conll import Sentence, read_conll
from ner_app.text.tags import detect_scheme, entities

SHARED = Path(os.environ.get("NER_SHARED", Path(__file__).resolve().parents[3] / "shared"))
CONLL = SHARED / "data" / "conll2003"

pytestmark = pytest.mark.skipif(
    not all((CONLL / f"{s}.txt").is_file() for s in ("train", "valid", "test")),
    reason=f"CoNLL-2003 not found in {CONLL} (set NER_SHARED to the shared folder)",
)

# split: documents, sentences, tokens, entities
OFFICIAL = {
    "train": (946, 14_041, 203_621, 23_499),
    "valid": (216, 3_250, 51_362, 5_942),
    "test": (231, 3_453, 46_435, 5_648),
}
TYPES = {
    "train": {"PER": 6_600, "LOC": 7_140, "ORG": 6_321, "MISC": 3_438},
    "test": {"PER": 1_617, "LOC": 1_668, "ORG": 1_661, "MISC": 702},
}


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[Sentence]]:
    return {split: read_conll(CONLL / f"{split}.txt") for split in OFFICIAL}


def entity_types(sentences: list[Sentence]) -> Counter[str]:
    return Counter(kind for s in sentences for kind, _, _ in entities(s.tags, "IOB1"))


@pytest.mark.parametrize("split", list(OFFICIAL))
def test_counts(corpus: dict[str, list[Sentence]], split: str) -> None:
    sentences = corpus[split]
    documents = len({s.doc for s in sentences})
    tokens = sum(len(s.tokens) for s in sentences)
    assert (documents, len(sentences), tokens, sum(entity_types(sentences).values())) == OFFICIAL[split]
    assert sentences[0].doc == 0 and sentences[-1].doc == OFFICIAL[split][0] - 1
    assert detect_scheme(s.tags for s in sentences) == "IOB1"


@pytest.mark.parametrize("split", list(TYPES))
def test_entities_per_type(corpus: dict[str, list[Sentence]], split: str) -> None:
    assert entity_types(corpus[split]) == TYPES[split]


def test_b_tags_only_between_adjacent_entities_of_one_type(corpus: dict[str, list[Sentence]]) -> None:
    b_tags = [(s.tags[i - 1], tag) for s in corpus["train"] for i, tag in enumerate(s.tags) if tag[0] == "B"]
    assert len(b_tags) == 70
    assert all(i > 0 for s in corpus["train"] for i, tag in enumerate(s.tags) if tag[0] == "B")
    assert all(prev[2:] == tag[2:] and prev != "O" for prev, tag in b_tags)


def test_docstart_lines() -> None:
    firsts = {split: (CONLL / f"{split}.txt").read_text().split("\n", 1)[0] for split in OFFICIAL}
    assert firsts == {
        "train": "-DOCSTART- -X- O O",
        "valid": "-DOCSTART- -X- O O",
        "test": "-DOCSTART- -X- -X- O",
    }
