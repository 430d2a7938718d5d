"""Partial annotation in the tag grammar and the CoNLL reader: ``-`` (not annotated) is read, detection and
conversion leave it alone and never guess a known tag (checked against every completion), scored files refuse it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ner_app.text.conll import ConllFormatError, Sentence, read_conll, require_annotated
from ner_app.text.tags import UNKNOWN, convert, detect_scheme, is_tag, is_tag_or_unknown, scheme_tags
from ner_app.text.vocab import build_tag_vocab

SCHEMES = ("IOB1", "IOB2", "BIOES")


def test_unknown_is_read_and_is_no_tag() -> None:
    assert is_tag_or_unknown(UNKNOWN) and not is_tag(UNKNOWN)
    assert not is_tag_or_unknown("--") and is_tag_or_unknown("B-PER")
    assert build_tag_vocab([["-", "B-PER", "-"], ["O"]], "BIO").itos == ["O", "B-PER", "I-PER"]


def test_reader_accepts_unknown_tags(tmp_path: Path) -> None:
    path = tmp_path / "train.txt"
    path.write_text("EU NNP B-ORG\nrejects VBZ -\n- : -\n\nPeter NNP -\n", encoding="utf-8")
    assert read_conll(path) == [
        Sentence(["EU", "rejects", "-"], ["B-ORG", "-", "-"], line=1, doc=0),
        Sentence(["Peter"], ["-"], line=5, doc=0),
    ]


def test_scored_files_refuse_unknown_tags_by_line(tmp_path: Path) -> None:
    path = tmp_path / "valid.txt"
    path.write_text("-DOCSTART- -X- O\n\nEU B-ORG\nrejects O\n\nPeter B-PER\nBlackburn -\n", encoding="utf-8")
    sentences = read_conll(path)
    with pytest.raises(ConllFormatError) as err:
        require_annotated(sentences, path)
    assert str(err.value) == (
        f"{path}:7: expected an annotated tag, found '-' (not annotated) for 'Blackburn': gold tags that are "
        "scored must all be known (partial annotation is for training files only)"
    )
    require_annotated(sentences[:1], path)  # fully annotated: fine


def test_detect_scheme_takes_no_evidence_from_unknown_tags() -> None:
    assert detect_scheme([["-", "I-PER", "O"]]) == "IOB2"  # the hidden tag may be B-PER
    assert detect_scheme([["O", "I-PER", "-"]]) == "IOB1"  # an I-PER after O opens an entity
    assert detect_scheme([["-", "-"], ["B-PER", "-", "E-PER"]]) == "BIOES"


def test_convert_leaves_unknowns_and_keeps_certain_tags() -> None:
    assert convert(["-", "B-X", "I-X", "-"], "IOB2", "BIOES") == ["-", "B-X", "-", "-"]
    assert convert(["-", "I-X", "I-X", "O"], "IOB1", "BIOES") == ["-", "-", "E-X", "O"]
    assert convert(["O", "I-X", "-", "I-X", "O"], "IOB1", "IOB2") == ["O", "B-X", "-", "-", "O"]
    assert convert(["-", "S-X", "O", "-"], "BIOES", "IOB2") == ["-", "B-X", "O", "-"]
    assert convert(["-", "O", "-"], "IOB2", "BIOES") == ["-", "O", "-"]
    assert convert(["-", "I-X", "-"], "BIO", "BIO") == ["-", "I-X", "-"]  # same scheme: a copy


def _alphabet(scheme: str) -> list[str]:
    return scheme_tags(scheme, ["X", "Y"])


@pytest.mark.parametrize(("source", "target"), [(s, t) for s in SCHEMES for t in SCHEMES if s != t])
def test_convert_is_exact_over_every_completion(source: str, target: str) -> None:
    """Every known output tag is the conversion of every full sequence that fits the partial one, and a known
    input tag becomes unknown only when two such sequences convert it differently."""
    tags = _alphabet(source)
    longest = 3 if "BIOES" in (source, target) else 4  # 9 BIOES tags: 9^3 sequences per hidden pattern
    for n in range(1, longest + 1):
        for partial in itertools.product([*tags, UNKNOWN], repeat=n):
            hidden = [t == UNKNOWN for t in partial]
            if all(hidden) or not any(hidden):
                continue
            got = convert(partial, source, target)
            fills = itertools.product(tags, repeat=sum(hidden))
            options = []
            for fill in fills:
                values = iter(fill)
                options.append(
                    convert(
                        [next(values) if h else t for t, h in zip(partial, hidden, strict=True)],
                        source,
                        target,
                    )
                )
            for i in range(n):
                seen = {o[i] for o in options}
                if hidden[i] or len(seen) > 1:
                    assert got[i] == UNKNOWN, (partial, got, i)
                else:
                    assert got[i] == seen.pop(), (partial, got, i)
