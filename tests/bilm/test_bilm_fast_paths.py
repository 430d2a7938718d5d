"""The biLM's faster code paths against the original ones: the trimmed char CNN, torch's
LSTM kernel for clip-free biLMs (on CPU here; on CUDA with the ``cuda`` marker), and bf16 pretraining."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ner_app.bilm import char_cnn as char_cnn_module
from ner_app.bilm import lstm as lstm_module
from ner_app.bilm.bilm import set_code_paths
from ner_app.bilm.char_cnn import CharCNN, trim_constant_tail
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.lstm import ElmoLstm, LstmCellWithProjection, TorchLstmUse
from ner_app.bilm.options import BilmOptions
from ner_app.bilm.weights import load_bilm
from ner_app.config.load import BilmPretrainConfig, load_config
from ner_app.pretrain.run import run_pretraining
from tests.helpers import REPO, TINY_OPTIONS, random_bilm, tiny_overrides, write_grammar

SIZES = [4, 4, 3, 2, 2, 1]  # a packed batch of 4 rows with lengths 6, 5, 3, 2


def random_cell(
    clip: float | None, seed: int = 0, torch_lstm: TorchLstmUse = "auto"
) -> LstmCellWithProjection:
    torch.manual_seed(seed)
    cell = LstmCellWithProjection(6, 12, 5, clip, None if clip is None else 0.4, torch_lstm=torch_lstm)
    with torch.no_grad():
        for p in cell.parameters():
            p.uniform_(-1, 1)  # large enough that both clips and every gate matter
    return cell


def run_cell(cell: LstmCellWithProjection, resets: torch.Tensor | None, seed: int = 1) -> list[torch.Tensor]:
    """Outputs, final state and the gradients of a random linear function of all three w.r.t. everything."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(sum(SIZES), 6, generator=gen, requires_grad=True)
    h0 = torch.randn(4, 5, generator=gen, requires_grad=True)
    c0 = torch.randn(4, 12, generator=gen, requires_grad=True)
    out, (h, c) = cell(x, SIZES, (h0, c0), resets=resets)
    loss = sum((t * torch.randn(t.shape, generator=gen)).sum() for t in (out, h, c))
    grads = torch.autograd.grad(loss, [x, h0, c0, *cell.parameters()])
    return [out.detach(), h.detach(), c.detach(), *grads]


def test_trimmed_char_cnn_is_exact() -> None:
    torch.manual_seed(0)
    cnn = CharCNN(4, ((1, 4), (3, 8), (7, 8)), trim_tail=False)
    torch.manual_seed(0)
    trimmed = CharCNN(4, ((1, 4), (3, 8), (7, 8)))  # the same weights, the default path
    assert trimmed.trim_tail and not cnn.trim_tail
    words = [["the", "Internationalization", "a", ",", "x" * 60, "é"], ["b", "cd"]]
    ids = batch_to_ids(words)
    ids = ids[(ids > 0).any(-1)]  # (8, 50): the tokens
    for rows in ([0, 1, 2, 3, 5, 6, 7], [6, 7], [2], list(range(8))):
        full = cnn(ids[rows])
        # The same sums, but the conv kernel may block a shorter input differently: bit-equal on the Intel
        # Xeon, last-bit differences on an AMD EPYC (oneDNN picks per CPU and shape).
        torch.testing.assert_close(trimmed(ids[rows]), full, atol=1e-6, rtol=1e-6)
    assert trim_constant_tail(ids[[6, 7]], 7).shape == (2, 4 + 7)  # "cd" is <w> c d </w>: 4 ids + width
    assert trim_constant_tail(ids, 7).shape == (8, 50)  # a 50-id word keeps everything
    assert trim_constant_tail(ids[:0], 7).shape == (0, 50)


@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("with_resets", [False, True])
def test_inference_steps_give_the_autograd_loop_bit_for_bit(clip: float | None, with_resets: bool) -> None:
    """Without autograd the cell works inside its input projections; the outputs and final state are the same
    bits as the out-of-place loop's, in fp32 and under bf16 autocast."""
    cell = random_cell(clip, torch_lstm="off")
    gen = torch.Generator().manual_seed(3)
    x, h0, c0 = (
        torch.randn(sum(SIZES), 6, generator=gen),
        torch.randn(4, 5, generator=gen),
        torch.randn(4, 12),
    )
    resets = torch.tensor([0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0], dtype=torch.bool)
    resets = resets if with_resets else None
    for autocast in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            expected = cell(x, SIZES, (h0, c0), resets=resets)  # grad enabled: the autograd loop
            projected = cell.input_projection(x).detach()
            with torch.no_grad():
                found = cell(x, SIZES, (h0, c0), projected, resets)
        assert torch.equal(found[0], expected[0].detach()) and found[0].dtype == expected[0].dtype
        for got, want in zip(found[1], expected[1], strict=True):
            assert torch.equal(got, want.detach())
        assert found[1][1].is_contiguous()  # the carried cell is no view into the projections


def test_torch_lstm_path_is_the_cell_without_clips(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = lstm_module.torch_lstm_recurrence
    monkeypatch.setattr("ner_app.bilm.lstm.torch_lstm_recurrence", lambda *a: calls.append(1) or original(*a))
    loop = run_cell(random_cell(None, torch_lstm="off"), None)
    assert not calls
    cell = random_cell(None, torch_lstm="on")  # the same weights
    kernel = run_cell(cell, None)
    assert calls
    for a, b in zip(loop, kernel, strict=True):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)
    calls.clear()
    run_cell(random_cell(0.5, torch_lstm="on"), None)  # clips: the kernel cannot compute them
    run_cell(cell, torch.tensor([i == 5 for i in range(sum(SIZES))]))  # a reset inside the sequence
    assert not calls
    run_cell(random_cell(None), None)  # the default, "auto"
    assert not calls  # "auto" takes the kernel for CUDA inputs only, and these are on the CPU


def clip_free(options: BilmOptions = TINY_OPTIONS) -> BilmOptions:
    return BilmOptions(**{**options.__dict__, "cell_clip": None, "proj_clip": None})


def test_torch_lstm_path_in_the_bilm_with_skips_and_stateful_carry() -> None:
    bilm = random_bilm(clip_free())
    assert isinstance(bilm.lstm, ElmoLstm) and bilm.lstm.use_skip_connections
    batches = [
        batch_to_ids([["a", "b", "c"], ["dd"], ["e", "f"]]),
        batch_to_ids([["g", "h"], ["i", "j", "k", "l"]]),
    ]
    results = {}
    for use in ("off", "on"):
        set_code_paths(bilm, torch_lstm=use)
        bilm.stateful = True  # resets the carried state
        with torch.no_grad():
            results[use] = [layer for ids in batches for layer in bilm(ids).layers]
    for a, b in zip(results["off"], results["on"], strict=True):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def run_windows(lstm: ElmoLstm, x: torch.Tensor, states: list | None) -> tuple[torch.Tensor, list]:
    """The forward stack over full windows (B, T, P), as pretraining runs it: carried states, time-major rows."""
    batch, steps, _ = x.shape
    if states is None:
        states = [
            (x.new_zeros(batch, lstm.projection_size), x.new_zeros(batch, lstm.cell_size))
        ] * lstm.n_layers
    data = x.transpose(0, 1).reshape(steps * batch, -1)
    stack = list(lstm.run_direction(lstm.forward_layers, data, [batch] * steps, states))
    return stack[-1][0].view(steps, batch, -1).transpose(0, 1), [
        (h.detach(), c.detach()) for _, (h, c) in stack
    ]


def test_torch_lstm_path_trains_pretraining_windows_like_the_loop() -> None:
    bilm = random_bilm(clip_free(), scale=0.3).train()
    lstm = bilm.lstm
    x = torch.randn(3, 7, lstm.projection_size)
    grads = {}
    for use in ("off", "on"):
        set_code_paths(lstm, torch_lstm=use)
        lstm.zero_grad()
        first, states = run_windows(lstm, x[:, :4], None)
        second, _ = run_windows(lstm, x[:, 4:], states)
        (torch.cat([first, second], 1) * torch.linspace(-1, 1, 7)[None, :, None]).sum().backward()
        grads[use] = [p.grad.clone() for p in lstm.forward_layers.parameters()]
        grads[use].append(torch.cat([first, second], 1).detach())
    for a, b in zip(grads["off"], grads["on"], strict=True):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


@pytest.mark.cuda
def test_torch_lstm_path_on_cuda_matches_the_cpu_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # cuDNN convolutions default to TF32 (10-bit mantissa) on Ampere and later: off, to compare fp32 with fp32
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    calls = []
    original = lstm_module.torch_lstm_recurrence
    monkeypatch.setattr("ner_app.bilm.lstm.torch_lstm_recurrence", lambda *a: calls.append(1) or original(*a))
    bilm = random_bilm(clip_free())
    ids = batch_to_ids([["a", "b", "c"], ["dd"], ["e", "f"]])
    set_code_paths(bilm, torch_lstm="off")
    with torch.no_grad():
        expected = bilm(ids).layers
        set_code_paths(bilm, torch_lstm="auto")  # CUDA and no clips: cuDNN
        found = bilm.cuda()(ids.cuda()).layers
    assert calls
    for a, b in zip(expected, found, strict=True):
        torch.testing.assert_close(b.cpu(), a, atol=1e-4, rtol=1e-4)


@pytest.mark.system
@pytest.mark.slow
def test_bf16_pretraining_reaches_the_fp32_perplexity(tmp_path: Path) -> None:
    """bf16 autocast on the CPU (fp32 master weights) learns the tiny grammar as well as fp32 does."""
    corpus = write_grammar(tmp_path / "train.txt", 1500, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 100, seed=1)
    results = {}
    for precision in ("32-true", "bf16-mixed"):
        overrides = tiny_overrides(tmp_path / precision, corpus, [heldout], steps=120)
        overrides += [f"train.precision={precision}", "train.accelerator=cpu"]
        cfg = load_config(REPO / "configs" / "bilm_tiny.yaml", overrides, schema=BilmPretrainConfig)
        results[precision] = run_pretraining(cfg)["heldout"]["heldout.txt"]["mean"]
    assert results["bf16-mixed"] < 5, results  # uniform would be 18, the grammar itself about 2
    assert abs(results["bf16-mixed"] - results["32-true"]) < 0.1 * results["32-true"], results


def test_argmax_gradient_of_the_char_cnn_is_the_tie_split_one_in_fp32() -> None:
    """The max passing its gradient to one window: the same features, and in fp32 the same gradients as amax's
    tie split up to rounding (the ties are windows over the same padding characters)."""
    words = [["the", "Internationalization", "a", ",", "x" * 60, "é", "b", "cd", "cd"]]
    ids = batch_to_ids(words)[0]  # (9, 50)
    gen = torch.Generator().manual_seed(0)
    weights = torch.randn(4 + 8 + 8, generator=gen)
    found = {}
    for argmax in (False, True):
        torch.manual_seed(0)
        cnn = CharCNN(4, ((1, 4), (3, 8), (7, 8)), argmax_grad=argmax)
        features = cnn(ids)
        (features * weights).sum().backward()
        found[argmax] = [features.detach(), *(p.grad for p in cnn.parameters())]
    assert torch.equal(found[False][0], found[True][0])
    for split, one in zip(found[False][1:], found[True][1:], strict=True):
        torch.testing.assert_close(one, split, rtol=1e-5, atol=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(found[False][1:], found[True][1:], strict=True))


@pytest.mark.system
@pytest.mark.slow
def test_argmax_gradient_pretrains_to_the_same_perplexity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same recipe with the char CNN's original max gradient (amax) and the default one reach the same
    held-out perplexity on the tiny grammar."""
    corpus = write_grammar(tmp_path / "train.txt", 1500, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 100, seed=1)
    results = {}
    for name in ("amax", "argmax"):
        if name == "amax":
            monkeypatch.setattr(char_cnn_module, "_max_over_positions", lambda f, one_window: f.amax(dim=-1))
        else:
            monkeypatch.undo()
        overrides = tiny_overrides(tmp_path / name, corpus, [heldout], steps=120) + ["train.accelerator=cpu"]
        cfg = load_config(REPO / "configs" / "bilm_tiny.yaml", overrides, schema=BilmPretrainConfig)
        results[name] = run_pretraining(cfg)["heldout"]["heldout.txt"]["mean"]
    assert results["argmax"] < 5, results  # uniform would be 18, the grammar itself about 2
    assert abs(results["argmax"] - results["amax"]) < 0.02 * results["amax"], results


def test_pretraining_without_clips_exports_null_clips(tmp_path: Path) -> None:
    """A clip-free biLM (the GPU path's condition) pretrains, exports nulls in options.json and loads back."""
    corpus = write_grammar(tmp_path / "train.txt", 200, seed=0)
    overrides = tiny_overrides(tmp_path, corpus, [corpus], steps=5) + [
        "model.cell_clip=null",
        "model.proj_clip=null",
    ]
    cfg = load_config(REPO / "configs" / "bilm_tiny.yaml", overrides, schema=BilmPretrainConfig)
    run_pretraining(cfg)
    run = tmp_path / "run"
    lstm_options = json.loads((run / "options.json").read_text())["lstm"]
    assert lstm_options["cell_clip"] is None and lstm_options["proj_clip"] is None
    cell = load_bilm(run / "options.json", run / "weights.hdf5").lstm.forward_layers[0]
    assert cell.cell_clip is None and cell.proj_clip is None


def test_code_paths_are_per_model_and_set_on_a_built_bilm() -> None:
    """The switches are constructor arguments and instance settings: setting one biLM leaves another alone."""
    one, other = TINY_OPTIONS.build(), TINY_OPTIONS.build()
    set_code_paths(one, torch_lstm="off", trim_tail=False)
    cells = [m for m in one.modules() if isinstance(m, LstmCellWithProjection)]
    assert cells and all(c.torch_lstm == "off" for c in cells) and not one.token_encoder.char_cnn.trim_tail
    assert all(c.torch_lstm == "auto" for c in other.modules() if isinstance(c, LstmCellWithProjection))
    assert other.token_encoder.char_cnn.trim_tail
    built = ElmoLstm(4, 6, 4, 2, None, None, True, torch_lstm="on")
    assert {c.torch_lstm for c in built.modules() if isinstance(c, LstmCellWithProjection)} == {"on"}
