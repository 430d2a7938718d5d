"""The tagger's BiLSTM layer over padded rows against a per-sentence LSTM written out, and against packed rows."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ner_app.tagger import bilstm
from ner_app.tagger.bilstm import BiLstm

LENGTHS = [5, 1, 7, 3, 7]


@pytest.fixture(autouse=True)
def always_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """These batches are short: take the fused call whatever their size, so that it is what the tests check."""
    monkeypatch.setattr(bilstm, "FUSED_MIN_STEPS", 1)
    monkeypatch.setattr(bilstm, "FUSED_MIN_ROWS", 1)


def brute_force(lstm: nn.LSTM, x: torch.Tensor, suffix: str) -> torch.Tensor:
    """One direction over one sentence x (T, D), step by step in float64: i, f, g, o as torch orders them."""
    w_ih, w_hh = (getattr(lstm, f"{n}_l0{suffix}").double() for n in ("weight_ih", "weight_hh"))
    bias = getattr(lstm, f"bias_ih_l0{suffix}").double() + getattr(lstm, f"bias_hh_l0{suffix}").double()
    steps = range(x.shape[0]) if not suffix else reversed(range(x.shape[0]))
    h = torch.zeros(lstm.hidden_size, dtype=torch.float64)
    c = torch.zeros_like(h)
    out = torch.zeros(x.shape[0], lstm.hidden_size, dtype=torch.float64)
    for t in steps:
        i, f, g, o = (w_ih @ x[t].double() + w_hh @ h + bias).chunk(4)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out[t] = h
    return out


def padded(seed: int = 0, dim: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    lengths = torch.tensor(LENGTHS)
    mask = torch.arange(max(LENGTHS))[None] < lengths[:, None]  # (B, T)
    x = torch.randn(len(LENGTHS), max(LENGTHS), dim) * mask[:, :, None]  # (B, T, D)
    return x, lengths, mask


def packed_rows(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=x.shape[1])[0]


def test_rows_equal_each_sentence_run_step_by_step_in_both_directions() -> None:
    x, lengths, mask = padded()
    torch.manual_seed(1)
    lstm = BiLstm(6, 4)
    out = lstm.rows(x, lengths, mask)  # (B, T, 8)
    for b, n in enumerate(LENGTHS):
        expected = torch.cat(
            [brute_force(lstm, x[b, :n], ""), brute_force(lstm, x[b, :n], "_reverse")], dim=-1
        )
        torch.testing.assert_close(out[b, :n].double(), expected, atol=1e-6, rtol=1e-6)
    assert torch.equal(out[~mask], torch.zeros_like(out[~mask]))


def test_rows_and_their_gradients_equal_the_packed_rows() -> None:
    x, lengths, mask = padded()
    torch.manual_seed(1)
    lstm = BiLstm(6, 4)
    weights = torch.randn(len(LENGTHS), max(LENGTHS), 8)
    grads = []
    for run in (lambda x: lstm.rows(x, lengths, mask), lambda x: packed_rows(lstm, x, lengths)):
        lstm.zero_grad()
        xi = x.clone().requires_grad_(True)
        out = run(xi)
        (out * weights).sum().backward()
        grads.append([out.detach(), xi.grad, *(p.grad.clone() for p in lstm.parameters())])  # type: ignore[union-attr]
    for fused, reference in zip(*grads, strict=True):
        torch.testing.assert_close(fused, reference, atol=1e-6, rtol=1e-5)


def test_a_sentence_alone_equals_it_in_a_batch() -> None:
    x, lengths, mask = padded()
    torch.manual_seed(1)
    lstm = BiLstm(6, 4)
    batch = lstm.rows(x, lengths, mask)
    for b, n in enumerate(LENGTHS):
        alone = lstm.rows(x[b : b + 1, :n], lengths[b : b + 1], mask[b : b + 1, :n])
        torch.testing.assert_close(alone[0], batch[b, :n], atol=1e-6, rtol=1e-6)


def test_it_is_an_nn_lstm_in_keys_initial_weights_and_random_draws() -> None:
    torch.manual_seed(3)
    ours = BiLstm(6, 4)
    after_ours = torch.random.get_rng_state()
    torch.manual_seed(3)
    theirs = nn.LSTM(6, 4, batch_first=True, bidirectional=True)
    assert torch.equal(after_ours, torch.random.get_rng_state())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for a, b in zip(ours.state_dict().values(), theirs.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_traced_rows_stay_packed_and_agree() -> None:
    """Tracing (the ONNX exporter's route) keeps the packed rows, which ONNX's LSTM takes with their lengths."""
    x, lengths, mask = padded()
    torch.manual_seed(1)
    lstm = BiLstm(6, 4)

    class Rows(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = lstm

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm.rows(x, lengths, mask)

    traced = torch.jit.trace(Rows(), (x,), check_trace=False)
    graph = str(traced.graph)
    assert "pack_padded_sequence" in graph or "_pack_padded_sequence" in graph
    torch.testing.assert_close(traced(x), lstm.rows(x, lengths, mask), atol=1e-6, rtol=1e-6)


def test_bf16_autocast_stays_close_to_float32() -> None:
    x, lengths, mask = padded(dim=32)
    torch.manual_seed(1)
    lstm = BiLstm(32, 16)
    exact = lstm.rows(x, lengths, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = lstm.rows(x, lengths, mask)
    assert (low.float() - exact).abs().max().item() < 0.05
    assert torch.equal(low[~mask], torch.zeros_like(low[~mask]))


@pytest.mark.parametrize("lengths", [[1], [4, 4, 4]])
def test_rows_of_equal_lengths_and_single_steps(lengths: list[int]) -> None:
    torch.manual_seed(5)
    lstm = BiLstm(3, 2)
    x = torch.randn(len(lengths), max(lengths), 3)
    n = torch.tensor(lengths)
    mask = torch.arange(max(lengths))[None] < n[:, None]
    torch.testing.assert_close(lstm.rows(x, n, mask), packed_rows(lstm, x, n), atol=1e-6, rtol=1e-6)


def test_short_fp32_batches_and_single_rows_stay_packed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bilstm, "FUSED_MIN_STEPS", 10)
    monkeypatch.setattr(bilstm, "FUSED_MIN_ROWS", 2)
    assert BiLstm.fused(torch.zeros(8, 10, 3))
    assert not BiLstm.fused(torch.zeros(8, 9, 3))  # short
    assert not BiLstm.fused(torch.zeros(1, 40, 3))  # one row
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert BiLstm.fused(torch.zeros(1, 2, 3))  # only the fused call runs the LSTM in bf16
    assert not BiLstm.fused(torch.zeros(8, 40, 3, device="meta"))  # not on the CPU: cuDNN takes packed rows


def test_a_batch_gives_the_same_rows_by_either_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatch only picks a kernel: a batch just below and just above the threshold agree with packed."""
    torch.manual_seed(7)
    lstm = BiLstm(4, 3)
    for steps in (9, 10):
        monkeypatch.setattr(bilstm, "FUSED_MIN_STEPS", 10)
        n = torch.tensor([steps, 2, steps - 1])
        x = torch.randn(3, steps, 4)
        mask = torch.arange(steps)[None] < n[:, None]
        torch.testing.assert_close(lstm.rows(x, n, mask), packed_rows(lstm, x, n), atol=1e-6, rtol=1e-6)
