"""torch's private API that the biLM reaches (``ner_app/bilm/torch_compat.py``), pinned to the supported range:
``packed_lstm`` computes what the public ``torch.nn.LSTM(proj_size=P)`` computes over a ``PackedSequence``."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from packaging.requirements import Requirement
from torch.nn.utils.rnn import pack_padded_sequence

from ner_app.bilm.torch_compat import SUPPORTED, packed_lstm
from tests.versions import installed_in_range, supported_range


def test_the_compat_module_states_pyprojects_range_and_torch_is_in_it() -> None:
    assert Requirement(SUPPORTED).specifier == supported_range("torch")
    installed_in_range("torch")


def test_torchs_private_names_appear_in_the_compat_module_only() -> None:
    package = Path(__file__).resolve().parents[2] / "ner_app"
    outside = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name != "torch_compat.py"
        and re.search(r"\btorch\._[A-Za-z]", path.read_text(encoding="utf-8"))
    ]
    assert not outside, outside


def test_packed_lstm_is_the_public_lstm_with_projection() -> None:
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(6, 12, proj_size=5, batch_first=True)
    x = torch.randn(4, 7, 6, requires_grad=True)
    lengths = torch.tensor([7, 5, 3, 1])
    h0, c0 = torch.randn(1, 4, 5), torch.randn(1, 4, 12)
    packed = pack_padded_sequence(x, lengths, batch_first=True)  # sorted: the packed row order is the batch's
    expected, (h, c) = lstm(packed, (h0, c0))
    weights = [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0, lstm.weight_hr_l0]
    out, h1, c1 = packed_lstm(packed.data, packed.batch_sizes.tolist(), h0[0], c0[0], weights)
    assert torch.equal(out, expected.data) and torch.equal(h1, h[0]) and torch.equal(c1, c[0])
    # differentiable through the weights: the biLM trains its own parameters through this call
    (grad,) = torch.autograd.grad(out.sum(), [lstm.weight_hr_l0])
    (public,) = torch.autograd.grad(expected.data.sum(), [lstm.weight_hr_l0])
    torch.testing.assert_close(grad, public)
