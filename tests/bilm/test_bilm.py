"""Invariances and unit behaviour of the biLM, ScalarMix, Elmo and the token cache."""

import pytest
import torch

from ner_app.bilm import BidirectionalLM, Elmo, ScalarMix, batch_to_ids
from ner_app.bilm.lstm import reverse_within_length
from tests.helpers import TINY_OPTIONS, random_bilm

SENTENCES = [
    ["The", "EU", "rejects", "German", "call", "."],
    ["Peter", "Blackburn"],
    [],
    ["a", "b", "a", "a"],
]


def run(bilm: BidirectionalLM, sentences):
    with torch.no_grad():
        return bilm(batch_to_ids(sentences))


def test_output_shapes_and_layer0_duplicates_token_representation():
    out = run(random_bilm(), SENTENCES)
    assert len(out.layers) == 3
    for layer in out.layers:
        assert layer.shape == (4, 6 + 2, 12)
    assert out.mask.tolist()[1] == [True] * 4 + [False] * 4
    assert out.mask[2].sum() == 2  # an empty sentence still has <S> and </S>
    assert torch.equal(out.layers[0][..., :6], out.layers[0][..., 6:])


def test_stateless_batch_equals_one_sentence_at_a_time():
    bilm = random_bilm()
    batched = run(bilm, SENTENCES)
    for i, sentence in enumerate(SENTENCES):
        alone = run(bilm, [sentence])
        n = len(sentence) + 2
        for layer_b, layer_a in zip(batched.layers, alone.layers, strict=True):
            torch.testing.assert_close(layer_b[i, :n], layer_a[0, :n], atol=1e-6, rtol=1e-6)


def test_stateless_is_deterministic_across_calls():
    bilm = random_bilm()
    first, second = run(bilm, SENTENCES), run(bilm, SENTENCES)
    assert all(torch.equal(a, b) for a, b in zip(first.layers, second.layers, strict=True))


def test_padded_positions_are_exactly_zero():
    out = run(random_bilm(), SENTENCES)
    for layer in out.layers:
        assert torch.count_nonzero(layer[~out.mask]) == 0


def test_extra_padding_columns_do_not_change_outputs():
    bilm = random_bilm()
    ids = batch_to_ids(SENTENCES)
    padded = torch.cat([ids, torch.zeros(4, 3, 50, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a, b = bilm(ids), bilm(padded)
    for la, lb in zip(a.layers, b.layers, strict=True):
        torch.testing.assert_close(lb[:, : la.shape[1]], la, atol=1e-6, rtol=1e-6)
        assert torch.count_nonzero(lb[:, la.shape[1] :]) == 0


def test_backward_direction_reads_right_to_left():
    # Changing the last token must change the backward output at the first token, not the forward one.
    bilm = random_bilm()
    a = run(bilm, [["x", "y", "z"]]).layers[1]
    b = run(bilm, [["x", "y", "w"]]).layers[1]
    torch.testing.assert_close(a[0, 1, :6], b[0, 1, :6])
    assert not torch.allclose(a[0, 1, 6:], b[0, 1, 6:])


def test_reverse_within_length():
    x = torch.arange(8.0).view(2, 4, 1)
    out = reverse_within_length(x, torch.tensor([3, 4]))
    assert out[..., 0].tolist() == [[2, 1, 0, 3], [7, 6, 5, 4]]


def test_stateful_rows_continue_and_extra_rows_start_at_zero():
    a = [["one", "two"], ["three"], ["four", "five", "six"]]
    b = [["seven"], ["eight", "nine"]]
    c = [["ten"], ["eleven"], ["twelve", "thirteen"]]
    model = random_bilm()
    model.stateful = True
    for batch in (a, b):
        run(model, batch)
    got = run(model, c).layers[-1]
    # Row 2 last ran in call a (call b had 2 rows): its state comes from a's row 2 only.
    solo = random_bilm()
    solo.stateful = True
    run(solo, [a[2]])
    torch.testing.assert_close(got[2, :4], run(solo, [c[2]]).layers[-1][0, :4], atol=1e-6, rtol=1e-6)
    # Row 0 carries through a, b and c.
    solo.reset_states()
    for batch in (a, b):
        run(solo, [batch[0]])
    torch.testing.assert_close(got[0, :3], run(solo, [c[0]]).layers[-1][0, :3], atol=1e-6, rtol=1e-6)
    # And state matters at all: a stateless model differs.
    assert not torch.allclose(got[0, :3], run(random_bilm(), [c[0]]).layers[-1][0, :3])


def test_scalar_mix_weights_gamma_and_penalty():
    mix = ScalarMix(3, initial_scalar_parameters=[0.0, 1.0, 2.0])
    layers = [torch.full((1, 2, 4), float(v)) for v in (1, 2, 3)]
    w = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0)
    expected = w[0] * 1 + w[1] * 2 + w[2] * 3
    torch.testing.assert_close(mix(layers), torch.full((1, 2, 4), float(expected)))
    torch.testing.assert_close(mix.l2_penalty(), torch.tensor(5.0))
    with torch.no_grad():
        mix.gamma.fill_(2.0)
    torch.testing.assert_close(mix(layers), torch.full((1, 2, 4), 2 * float(expected)))


def test_scalar_mix_layer_norm_ignores_masked_elements():
    mix = ScalarMix(1, do_layer_norm=True)
    x = torch.tensor([[[1.0, 3.0], [100.0, -100.0]]])  # second position is padding
    mask = torch.tensor([[True, False]])
    out = mix([x], mask)
    # mean 2, variance 1 over the two unmasked elements
    torch.testing.assert_close(out[0, 0], torch.tensor([-1.0, 1.0]))
    with pytest.raises(ValueError, match="needs the mask"):
        mix([x])


def test_frozen_bilm_gets_no_gradient_and_mix_does():
    elmo = Elmo(random_bilm(), num_output_representations=2, dropout=0.0)
    out = elmo(batch_to_ids(SENTENCES))
    loss = sum(r.sum() for r in out.representations) + elmo.l2_penalty()
    loss.backward()
    assert all(p.grad is None and not p.requires_grad for p in elmo.bilm.parameters())
    for mix in elmo.scalar_mixes:
        assert mix.scalar_parameters.grad is not None and mix.gamma.grad is not None


def test_elmo_keeps_frozen_bilm_in_eval_mode():
    parent = torch.nn.Sequential(Elmo(random_bilm(), dropout=0.5))
    parent.train()
    assert parent[0].training and parent[0].dropout.training and not parent[0].bilm.training


def test_elmo_removes_boundaries_and_matches_raw_layers():
    elmo = Elmo(random_bilm(), dropout=0.0, scalar_mix_parameters=[1e4, -1e4, -1e4])  # all weight on layer 0
    ids = batch_to_ids(SENTENCES)
    out = elmo(ids)
    raw = elmo.layers(ids)
    assert out.mask.tolist() == [[True] * 6, [True] * 2 + [False] * 4, [False] * 6, [True] * 4 + [False] * 2]
    torch.testing.assert_close(out.representations[0], raw.layers[0][:, 1:-1] * out.mask[..., None])


def test_elmo_dropout_after_mixing_only_in_training():
    elmo = Elmo(random_bilm(), dropout=0.5)
    ids = batch_to_ids(SENTENCES)
    elmo.eval()
    a, b = elmo(ids).representations[0], elmo(ids).representations[0]
    assert torch.equal(a, b)
    elmo.train()
    assert not torch.equal(elmo(ids).representations[0], a)


def test_unfrozen_bilm_trains_with_dropout():
    bilm = TINY_OPTIONS.build(dropout=0.5)
    bilm.train()
    out = bilm(batch_to_ids(SENTENCES))
    out.layers[-1].sum().backward()
    assert all(p.grad is not None for name, p in bilm.named_parameters() if "lstm" in name)


def test_the_package_names_resolve_on_first_use() -> None:
    """``from ner_app.bilm import X`` works for every exported name, each from the module ``_HOMES`` names."""
    import ner_app.bilm as package

    assert sorted(package.__all__) == sorted(package._HOME_OF)
    for name in package.__all__:
        assert getattr(package, name).__module__.startswith("ner_app.bilm.")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        package.__getattr__("nothing")
