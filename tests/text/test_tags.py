"""Tag schemes: detection, entity spans, conversions and exact round trips (also on the real train set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ner_app.text.conll import read_conll
from ner_app.text.tags import (
    convert,
    detect_scheme,
    entities,
    from_entities,
    normalize_scheme,
    scheme_tags,
    split_tag,
)

SHARED = Path(os.environ.get("NER_SHARED", Path(__file__).resolve().parents[3] / "shared"))
TRAIN = SHARED / "data" / "conll2003" / "train.txt"

# one sentence in each scheme: PER PER (adjacent, same type), O, LOC, MISC MISC (one entity), ORG
IOB1 = ["I-PER", "B-PER", "O", "I-LOC", "I-MISC", "I-MISC", "I-ORG"]
IOB2 = ["B-PER", "B-PER", "O", "B-LOC", "B-MISC", "I-MISC", "B-ORG"]
BIOES = ["S-PER", "S-PER", "O", "S-LOC", "B-MISC", "E-MISC", "S-ORG"]
SPANS = [("PER", 0, 1), ("PER", 1, 2), ("LOC", 3, 4), ("MISC", 4, 6), ("ORG", 6, 7)]
BY_SCHEME = {"IOB1": IOB1, "IOB2": IOB2, "BIOES": BIOES}


def test_detect_scheme() -> None:
    assert detect_scheme([["O"], IOB1]) == "IOB1"
    assert detect_scheme([IOB2, ["O"]]) == "IOB2"
    assert detect_scheme([BIOES]) == "BIOES"
    assert detect_scheme([["B-PER", "I-PER", "O", "B-LOC"]]) == "IOB2"
    assert detect_scheme([["B-PER", "I-LOC"]]) == "IOB1"  # I-LOC starts an entity
    assert detect_scheme([["O", "O"], []]) == "IOB2"  # nothing to tell: IOB2
    assert detect_scheme([["B-PER", "I-PER", "E-PER"]]) == "BIOES"


def test_detect_scheme_rejects_bad_tags() -> None:
    with pytest.raises(ValueError, match="invalid tag 'PER'"):
        detect_scheme([["O", "PER"]])


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2", "BIOES"])
def test_entities(scheme: str) -> None:
    assert entities(BY_SCHEME[scheme], scheme) == SPANS
    assert from_entities(SPANS, len(IOB1), scheme) == BY_SCHEME[scheme]


@pytest.mark.parametrize("source", ["IOB1", "IOB2", "BIOES"])
@pytest.mark.parametrize("target", ["IOB1", "IOB2", "BIOES"])
def test_convert_and_round_trip(source: str, target: str) -> None:
    converted = convert(BY_SCHEME[source], source, target)
    assert converted == BY_SCHEME[target]
    assert convert(converted, target, source) == BY_SCHEME[source]


def test_convert_within_a_scheme_repairs_ill_formed_sequences() -> None:
    """Training reads a BIOES file in BIOES: an ill-formed gold path (a hidden token read as O inside an
    entity) reaches the CRF repaired, as the lenient reading decodes it, and a well-formed one is unchanged."""
    broken = ["B-PER", "O", "E-PER", "I-LOC"]
    repaired = convert(broken, "BIOES", "BIOES")
    assert repaired == from_entities(entities(broken, "BIOES"), 4, "BIOES")
    assert repaired != broken and convert(repaired, "BIOES", "BIOES") == repaired
    for scheme, tags in BY_SCHEME.items():
        assert convert(tags, scheme, scheme) == tags
    assert convert(["B-PER", "-", "E-PER"], "BIOES", "BIOES") == ["B-PER", "-", "E-PER"]  # unknown: kept


def test_aliases_and_helpers() -> None:
    assert convert(IOB1, "IOB1", "IOB2") == IOB2
    assert convert(IOB1, "IOB1", "BIOES") == BIOES
    assert convert(BIOES, "IOBES", "BIO") == IOB2
    assert normalize_scheme("bio") == "IOB2"
    with pytest.raises(ValueError, match="unknown tag scheme 'BILOU'"):
        normalize_scheme("BILOU")
    assert split_tag("B-PER") == ("B", "PER")
    assert split_tag("O") == ("O", "")
    assert scheme_tags("BIO", {"PER", "LOC"}) == ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]


def test_lenient_decoding_of_invalid_sequences() -> None:
    # model output need not be well formed: stray I-/E- tags start an entity, like conlleval
    assert entities(["O", "I-PER", "I-PER"], "IOB2") == [("PER", 1, 3)]
    assert entities(["B-PER", "I-LOC"], "IOB2") == [("PER", 0, 1), ("LOC", 1, 2)]
    assert entities(["E-PER", "I-PER", "B-LOC"], "BIOES") == [("PER", 0, 1), ("PER", 1, 2), ("LOC", 2, 3)]
    assert entities(["B-PER", "B-PER", "O", "I-ORG"], "BIOES") == [
        ("PER", 0, 1),
        ("PER", 1, 2),
        ("ORG", 3, 4),
    ]
    assert convert(["O", "I-PER", "I-PER"], "IOB2", "BIOES") == ["O", "B-PER", "E-PER"]


def test_tags_outside_the_scheme_are_rejected() -> None:
    with pytest.raises(ValueError, match="'S-PER' at position 1 is not valid in scheme IOB1"):
        entities(["O", "S-PER"], "IOB1")


def test_same_scheme_is_a_copy() -> None:
    tags = ["I-PER", "O"]
    out = convert(tags, "IOB1", "IOB1")
    assert out == tags and out is not tags


@pytest.mark.skipif(not TRAIN.is_file(), reason=f"CoNLL-2003 not found at {TRAIN} (set NER_SHARED)")
def test_round_trips_on_the_real_train_set() -> None:
    tags = [s.tags for s in read_conll(TRAIN)]
    assert detect_scheme(tags) == "IOB1"
    for target in ("BIOES", "BIO"):
        converted = [convert(t, "IOB1", target) for t in tags]
        assert detect_scheme(converted) == normalize_scheme(target)
        assert [convert(t, target, "IOB1") for t in converted] == tags
    assert sum(len(entities(t, "IOB1")) for t in tags) == 23_499


def test_the_scheme_records_give_every_table() -> None:
    """The training names, seqeval's modes, the tag pattern and data.scheme's choices all come from SCHEMES."""
    import re
    import typing

    import seqeval.scheme

    from ner_app.config.schema import DataConfig
    from ner_app.text.tags import SCHEMES, TAG_PATTERN, TRAINABLE_SCHEMES, TRAINING_SCHEMES, scheme_of

    assert list(SCHEMES) == ["IOB1", "IOB2", "BIOES"]
    assert TRAINING_SCHEMES == ("BIO", "BIOES", "IOB1") and TRAINABLE_SCHEMES == ("BIO", "BIOES")
    assert typing.get_args(typing.get_type_hints(DataConfig)["scheme"]) == TRAINABLE_SCHEMES
    for name in TRAINABLE_SCHEMES:  # every scheme a run trains in is one seqeval scores in strict mode
        assert issubclass(getattr(seqeval.scheme, str(scheme_of(name).seqeval)), seqeval.scheme.Token)
    assert {n: scheme_of(n).name for n in ("bio", "IOB2", "iobes", "BIOES", "IOB1")} == {
        "bio": "IOB2",
        "IOB2": "IOB2",
        "iobes": "BIOES",
        "BIOES": "BIOES",
        "IOB1": "IOB1",
    }
    before = re.compile(r"O|[BIES]-\S+")  # the hand-written pattern the records replace
    for text in ("O", "B-PER", "I-X", "E-MISC", "S-A-B", "L-PER", "B-", "b-PER", "OO", "U-X", "B-P R"):
        assert (TAG_PATTERN.fullmatch(text) is None) == (before.fullmatch(text) is None), text


def test_entity_types_are_read_from_tags_of_any_scheme() -> None:
    from ner_app.text.tags import entity_types

    assert entity_types(["O", "B-PER", "I-PER", "S-LOC", "E-MISC", "I-ORG"]) == ["LOC", "MISC", "ORG", "PER"]
    assert entity_types(["<pad>", "<unk>", "O"]) == []  # a vocabulary's specials are no types
    assert entity_types(scheme_tags("BIOES", ["b", "a"])) == ["a", "b"]
