"""TaggerSpec: exact JSON round trip, older exports' tagger.json read, anything else refused in one line."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import ElmoRef, SpecError, TaggerSizes, TaggerSpec

SIZES = TaggerSizes(
    word_dim=4, char_dim=2, char_filters=3, char_width=3, lstm_hidden=5, lstm_layers=2, dropout=0.25
)
TOKENS = [["Peter", "met", "Bonn"], ["EU", "rejects", "it"]]
TAGS = [["S-PER", "O", "S-LOC"], ["S-ORG", "O", "O"]]
ELMO = ElmoRef(
    options="/x/options.json",
    weights="/x/weights.hdf5",
    fingerprint="ab" * 32,
    dropout=0.1,
    do_layer_norm=True,
)


def spec(elmo: ElmoRef | None = ELMO) -> TaggerSpec:
    return TaggerSpec.from_training_data(
        SIZES,
        TOKENS,
        TAGS,
        "BIOES",
        "IOB1",
        lowercase=True,
        pretrained_words=["paris", "Peter", "paris"],
        elmo=elmo,
    )


@pytest.mark.parametrize("elmo", [ELMO, None])
def test_json_round_trip_is_exact(elmo: ElmoRef | None) -> None:
    s = spec(elmo)
    text = json.dumps(s.to_json())
    back = TaggerSpec.from_json(json.loads(text))
    assert back == s and json.dumps(back.to_json()) == text
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.scheme = "BIO"  # type: ignore[misc]


def test_vocabularies_from_training_data() -> None:
    s = spec()
    assert s.word_vocab.itos[: s.num_trainable_words] == [
        "<pad>",
        "<unk>",
        *sorted(["peter", "met", "bonn", "eu", "rejects", "it"], key=lambda w: (-1, w)),
    ]
    assert s.word_vocab.itos[s.num_trainable_words :] == ["paris"]  # pretrained, unseen in train, once
    assert s.tag_vocab.itos[0] == "O" and "B-PER" in s.tag_vocab.itos
    assert s.to_source_scheme([["S-PER", "O"]]) == [["I-PER", "O"]]
    tagger = BiLstmCrfTagger.from_spec(spec(None), None)
    assert (
        tagger.feature("words").word_embed.num_embeddings == s.num_trainable_words
        and tagger.feature("words").frozen_word_vectors.shape[0] == 1
    )
    with pytest.raises(SpecError, match="a biLM is needed"):
        BiLstmCrfTagger.from_spec(s, None)


def v1_dict(s: TaggerSpec) -> dict:
    """What ner_app.tagger.export.make_spec wrote before the typed spec: the same layout, format /1."""
    return {
        "format": "ner_app.tagger/1",
        "model": dataclasses.asdict(s.sizes),
        "elmo": dataclasses.asdict(s.elmo) if s.elmo else None,
        "vocab": {
            "words": {"tokens": list(s.words.tokens), "specials": True, "lowercase": True},
            "num_trainable_words": s.num_trainable_words,
            "chars": {"tokens": list(s.chars.tokens), "specials": True, "lowercase": False},
            "tags": {"tokens": list(s.tags.tokens), "specials": False, "lowercase": False},
        },
        "scheme": "BIOES",
        "source_scheme": "IOB1",
        "max_word_chars": 30,
    }


def test_an_older_tagger_json_is_read() -> None:
    s = spec()
    assert TaggerSpec.from_json(v1_dict(s)) == s


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d.update(format="ner_app.tagger/0"),
            "format 'ner_app.tagger/0' is not one this version reads",
        ),
        (lambda d: d.pop("format"), "format None is not one this version reads"),
        (lambda d: d["model"].update(word_dim="4"), "key 'model.word_dim': expected int, found str '4'"),
        (lambda d: d["model"].pop("dropout"), "key 'model': expected the keys"),
        (
            lambda d: d["vocab"]["words"].update(tokens="abc"),
            "key 'vocab.words.tokens': expected a list of strings",
        ),
        (lambda d: d.update(elmo=[]), "key 'elmo': expected an object"),
        (lambda d: d.update(vocab=None), "key 'vocab': expected an object"),
        (lambda d: d["vocab"].update(num_trainable_words=10**6), "num_trainable_words is out of range"),
        (lambda d: d["vocab"]["words"]["tokens"].append("paris"), "vocab.words has duplicates"),
        (lambda d: d["vocab"]["words"]["tokens"].append("<unk>"), "vocab.words has duplicates"),  # a special
        (lambda d: d.update(max_word_chars=True), "key 'max_word_chars': expected int, found bool"),
        (lambda d: d.update(scheme="BILOU"), "key 'scheme': expected one of BIO, BIOES, IOB1, found 'BILOU'"),
        (
            lambda d: d.update(source_scheme="bio"),
            "key 'source_scheme': expected one of IOB1, IOB2, BIOES, found 'bio'",
        ),
    ],
)
def test_bad_specs_are_refused_in_one_line(edit, message) -> None:
    data = v1_dict(spec())
    edit(data)
    with pytest.raises(
        SpecError, match="^tagger.json: .*" + message.replace("(", r"\(").replace(")", r"\)")
    ) as err:
        TaggerSpec.from_json(data, "tagger.json")
    assert "\n" not in str(err.value)


def test_trained_state_round_trip_skips_the_bilm() -> None:
    a, b = BiLstmCrfTagger.from_spec(spec(None), None), BiLstmCrfTagger.from_spec(spec(None), None)
    torch.nn.init.ones_(a.output.weight)
    b.load_trained_state(a.trained_state(), "x")
    assert torch.equal(b.output.weight, a.output.weight)
    state = a.trained_state()
    state.pop("output.bias")
    with pytest.raises(
        SpecError, match=r"^x: tensors do not fit the tagger spec \(missing \['output.bias'\]"
    ):
        b.load_trained_state(state, "x")


def test_an_export_written_before_integrity_records_is_refused_with_one_clear_message() -> None:
    """tests/data/export_v1: the tiny config exported by the previous version (format ner_app.tagger/1). Its
    files carry no checksums, so it cannot be verified: it is refused with a message that says to re-export."""
    from pathlib import Path

    from ner_app.errors import NerAppError
    from ner_app.predict.predictor import Predictor

    root = Path(__file__).resolve().parents[1] / "data" / "export_v1"
    with pytest.raises(
        NerAppError, match=r"tagger.json: no 'integrity' record \(export again with this version\)"
    ):
        Predictor.from_export(root)
