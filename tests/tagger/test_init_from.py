"""Continuing a tagger (``ner_app.tagger.init_from``): the extended spec keeps every old word, character and tag;
the old weights land bit for bit in the rows of the same entries, new rows and new tags' transitions are what a
fresh tagger has; a mismatched architecture is one line naming the key."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from ner_app.tagger.init_from import InitFromError, carried_state, carry, check_compatible, extended_spec
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import ElmoRef, TaggerSizes, TaggerSpec

SIZES = TaggerSizes(
    word_dim=4, char_dim=3, char_filters=5, char_width=3, lstm_hidden=6, lstm_layers=2, dropout=0.5
)
OLD_TOKENS = [["Peter", "met", "Bonn"], ["EU", "rejects", "it"]]
OLD_TAGS = [["S-PER", "O", "S-LOC"], ["S-ORG", "O", "O"]]
# new words (Zoë, sells, iPhone, Köln), a word the old model knew only as a frozen pretrained one (paris), new
# characters (ë, ö), a new type (PROD); LOC and ORG absent from the new data
NEW_TOKENS = [["Zoë", "sells", "iPhone", "in", "Köln"], ["Peter", "met", "paris"]]
NEW_TAGS = [["S-PER", "O", "S-PROD", "O", "S-LOC"], ["S-PER", "O", "S-LOC"]]
ELMO = ElmoRef("/a/options.json", "/a/weights.hdf5", "ab" * 32, 0.0, False)


def make_spec(
    tokens, tags, pretrained=(), sizes=SIZES, scheme="BIOES", elmo=None, lowercase=True
) -> TaggerSpec:  # noqa: ANN001
    return TaggerSpec.from_training_data(
        sizes, tokens, tags, scheme, "BIOES", lowercase=lowercase, pretrained_words=pretrained, elmo=elmo
    )


OLD = make_spec(OLD_TOKENS, OLD_TAGS, pretrained=["paris", "london"])
FRESH = make_spec(NEW_TOKENS, NEW_TAGS, pretrained=["berlin"], sizes=dataclasses.replace(SIZES, dropout=0.1))


def randomised(spec: TaggerSpec, seed: int) -> BiLstmCrfTagger:
    """A tagger of ``spec`` whose every weight (frozen words included) is a seeded random draw."""
    torch.manual_seed(seed)
    tagger = BiLstmCrfTagger.from_spec(spec, None)
    with torch.no_grad():
        for tensor in tagger.state_dict().values():
            if tensor.is_floating_point():
                tensor.normal_()
    return tagger


def test_extended_spec_keeps_every_old_entry_and_adds_the_new() -> None:
    new = extended_spec(OLD, FRESH)
    old_words, new_words = OLD.word_vocab.itos, new.word_vocab.itos
    trainable = new_words[: new.num_trainable_words]
    assert trainable[: OLD.num_trainable_words] == old_words[: OLD.num_trainable_words]  # same ids
    assert {"zoë", "sells", "iphone", "köln", "paris"} <= set(trainable)  # paris: trained on now
    assert new_words[new.num_trainable_words :] == ["london", "berlin"]  # frozen: old ones, then new
    assert set(OLD.char_vocab.itos) < set(new.char_vocab.itos) and {"ë", "ö"} <= set(new.char_vocab.itos)
    assert new.char_vocab.itos[: len(OLD.char_vocab)] == OLD.char_vocab.itos
    # every tag of the scheme for LOC, ORG, PER and PROD, in the order training builds them (ONNX checks it)
    assert (
        new.tag_vocab.itos == make_spec([["a"] * 4], [["S-LOC", "S-ORG", "S-PER", "S-PROD"]]).tag_vocab.itos
    )
    assert new.sizes.dropout == 0.1  # the run's, not the export's
    assert len(set(new_words)) == len(new_words)
    assert TaggerSpec.from_json(new.to_json()) == new


def test_old_rows_are_copied_bit_for_bit_and_new_rows_are_fresh() -> None:
    old = randomised(OLD, seed=1)
    new_spec = extended_spec(OLD, FRESH)
    fresh = randomised(new_spec, seed=2)
    old_state, fresh_state = old.trained_state(), fresh.trained_state()
    state = carried_state(old_state, OLD, fresh_state, new_spec, "export")
    assert set(state) == set(fresh_state)

    def words(s: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([s["word_embed.weight"], s["frozen_word_vectors"]])

    old_words, new_words, fresh_words = words(old_state), words(state), words(fresh_state)
    for i, word in enumerate(new_spec.word_vocab.itos):
        expected = (
            old_words[OLD.word_vocab.itos.index(word)] if word in OLD.word_vocab.itos else fresh_words[i]
        )
        assert torch.equal(new_words[i], expected), word
    for i, char in enumerate(new_spec.char_vocab.itos):
        known = char in OLD.char_vocab.itos
        source = old_state["char_cnn.embed.weight"][OLD.char_vocab.itos.index(char)] if known else None
        expected = source if source is not None else fresh_state["char_cnn.embed.weight"][i]
        assert torch.equal(state["char_cnn.embed.weight"][i], expected), char
    old_tags, new_tags = OLD.tag_vocab.itos, new_spec.tag_vocab.itos
    for i, tag in enumerate(new_tags):
        for key in ("output.weight", "output.bias", "crf.start_transitions", "crf.end_transitions"):
            src = old_state[key][old_tags.index(tag)] if tag in old_tags else fresh_state[key][i]
            assert torch.equal(state[key][i], src), (key, tag)
    for (i, a), (j, b) in itertools.product(enumerate(new_tags), repeat=2):
        both_old = a in old_tags and b in old_tags
        src = old_state["crf.transitions"][old_tags.index(a), old_tags.index(b)] if both_old else None
        expected = src if src is not None else fresh_state["crf.transitions"][i, j]
        assert torch.equal(state["crf.transitions"][i, j], expected), (a, b)
    for key in ("char_cnn.conv.weight", "lstm.0.weight_ih_l0", "lstm.1.bias_hh_l0_reverse"):
        assert torch.equal(state[key], old_state[key])
    # and it loads: the continued tagger computes with exactly these tensors
    fresh.load_trained_state(state, "test")
    assert all(torch.equal(fresh.trained_state()[k], v) for k, v in state.items())


def test_carry_equals_an_entry_by_entry_copy() -> None:
    """Brute force: every entry of the result is the old one where both indices have a source, else the new."""
    gen = torch.Generator().manual_seed(0)
    old, new = torch.randn(5, 4, 3, generator=gen), torch.randn(7, 4, 6, generator=gen)
    rows = (torch.tensor([0, 2, 6]), torch.tensor([4, 0, 1]))  # new row 0 <- old row 4, ...
    cols = (torch.tensor([5, 1]), torch.tensor([0, 2]))
    out = carry(old, new, [rows, None, cols])
    source_rows = dict(zip(rows[0].tolist(), rows[1].tolist(), strict=True))
    source_cols = dict(zip(cols[0].tolist(), cols[1].tolist(), strict=True))
    for i, j, k in itertools.product(range(7), range(4), range(6)):
        if i in source_rows and k in source_cols:
            assert out[i, j, k] == old[source_rows[i], j, source_cols[k]]
        else:
            assert out[i, j, k] == new[i, j, k]
    with pytest.raises(InitFromError, match="size 4 became 5"):
        carry(old, torch.zeros(7, 5, 6), [rows, None, cols])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (dict(sizes=dataclasses.replace(SIZES, lstm_hidden=7)), "model.lstm_hidden is 7 in this run but 6"),
        (dict(sizes=dataclasses.replace(SIZES, char_width=5)), "model.char_width is 5"),
        (dict(sizes=dataclasses.replace(SIZES, lstm_layers=1)), "model.lstm_layers is 1"),
        (dict(scheme="BIO"), "data.scheme is 'BIO' in this run but 'BIOES'"),
        (dict(lowercase=False), "data.lowercase is False"),
        (dict(elmo=ELMO), "elmo.enabled is True in this run but False"),
    ],
)
def test_a_mismatch_is_one_line_naming_the_key(change: dict, key: str) -> None:
    tags = (
        NEW_TAGS
        if change.get("scheme") != "BIO"
        else [["B-PER", "O", "B-PROD", "O", "B-LOC"], ["B-PER", "O", "B-LOC"]]
    )
    run = make_spec(NEW_TOKENS, tags, **change)
    with pytest.raises(InitFromError) as err:
        check_compatible(OLD, run, "runs/old/export")
    message = str(err.value)
    assert message.startswith("runs/old/export: ") and key in message and "\n" not in message


def test_other_biLM_or_mix_settings_are_refused() -> None:
    old = make_spec(OLD_TOKENS, OLD_TAGS, elmo=ELMO)
    other = make_spec(NEW_TOKENS, NEW_TAGS, elmo=dataclasses.replace(ELMO, fingerprint="cd" * 32))
    with pytest.raises(
        InitFromError, match="another biLM than the export's .*elmo.options=exp/bilm/options.json"
    ):
        check_compatible(old, other, "exp")
    for change in (dict(at_output=True), dict(context="document"), dict(do_layer_norm=True)):
        run = make_spec(NEW_TOKENS, NEW_TAGS, elmo=dataclasses.replace(ELMO, **change))
        with pytest.raises(InitFromError, match=f"elmo.{next(iter(change))} is"):
            check_compatible(old, run, "exp")
    # dropout, the biLM's paths and the files' scheme may differ
    same = make_spec(NEW_TOKENS, NEW_TAGS, elmo=dataclasses.replace(ELMO, dropout=0.3, options="/b/o.json"))
    check_compatible(old, dataclasses.replace(same, source_scheme="IOB1"), "exp")
