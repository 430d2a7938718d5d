"""biLM pretraining: sampler, sampled softmax, stream data, state carry, a tiny run, export and the CLI."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ner_app.bilm.char_mapper import batch_to_ids, token_to_ids
from ner_app.bilm.weights import load_bilm
from ner_app.cli.commands import main
from ner_app.config.load import BilmPretrainConfig, load_config
from ner_app.errors import NerAppError
from ner_app.pretrain.batches import IGNORE
from ner_app.pretrain.data import pack, read_corpus
from ner_app.pretrain.documents import read_sentences
from ner_app.pretrain.heldout import sentence_batches
from ner_app.pretrain.metrics import PretrainMetrics
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.perplexity import evaluate
from ner_app.pretrain.run import run_pretraining
from ner_app.pretrain.softmax import Candidates, LogUniformSampler, SampledSoftmaxLoss
from ner_app.pretrain.softmax_file import SOFTMAX_FILE, load_softmax, save_softmax
from ner_app.pretrain.streams import StreamBatches
from ner_app.pretrain.vocab import SPECIALS, UNK_ID, SoftmaxVocab
from tests.helpers import REPO, tiny_overrides, write_grammar


# ------------------------------------------------------------------------------------ softmax
def test_sampled_softmax_is_the_full_softmax_when_every_class_is_sampled() -> None:
    """With num_sampled = V every class is a candidate with certainty: its inclusion probability (the expected
    count) is exactly 1, so the log-correction is 0; the true class drawn again as a negative is an accidental
    hit and removed; what is left is every class's logit once: the full softmax."""
    torch.manual_seed(0)
    loss = SampledSoftmaxLoss(num_classes=13, dim=5, num_sampled=13)
    with torch.no_grad():
        loss.b.normal_()
    hidden, labels = torch.randn(40, 5), torch.randint(0, 13, (40,))
    full = F.cross_entropy(hidden @ loss.W.t() + loss.b, labels)
    assert torch.allclose(loss.sampled_loss(hidden, labels), full, atol=1e-6, rtol=0)
    assert torch.allclose(loss.full_nll(hidden, labels, chunk=7).mean(), full, atol=1e-6, rtol=0)
    assert torch.allclose(loss.full_log_probs(hidden).exp().sum(-1), torch.ones(40), atol=1e-5)
    loss.eval()
    assert torch.allclose(loss(hidden, labels), full, atol=1e-6, rtol=0)


def test_sampled_softmax_correction_and_accidental_hits() -> None:
    torch.manual_seed(1)
    loss = SampledSoftmaxLoss(num_classes=10, dim=4, num_sampled=3)
    hidden, labels = torch.randn(6, 4), torch.tensor([0, 3, 5, 9, 3, 1])
    ids, tries = torch.tensor([3, 0, 7]), 5
    cand = Candidates(ids, loss.sampler.expected_count(ids, tries), tries)
    logits = hidden @ loss.W.t() + loss.b  # (6, 10)
    q = loss.sampler.expected_count(torch.arange(10), tries)
    expected = []
    for row, y in enumerate(labels.tolist()):
        terms = [logits[row, y] - q[y].log()] + [logits[row, k] - q[k].log() for k in ids.tolist() if k != y]
        expected.append(torch.logsumexp(torch.stack(terms), 0) - terms[0])
    assert torch.allclose(loss.sampled_loss(hidden, labels, cand), torch.stack(expected).mean(), atol=1e-5)


def test_log_uniform_sampler() -> None:
    v = 50
    sampler = LogUniformSampler(v, seed=3)
    p = sampler.probability(torch.arange(v))
    assert math.isclose(float(p.sum()), 1.0, rel_tol=1e-12)
    assert math.isclose(float(p[0]), math.log(2) / math.log(v + 1)) and bool((p[1:] < p[:-1]).all())
    draws = sampler.draw(400_000)
    assert int(draws.min()) >= 0 and int(draws.max()) < v
    freq = torch.bincount(draws, minlength=v).double() / len(draws)
    assert torch.allclose(freq, p, atol=3e-3)  # binomial std <= 4e-4
    assert torch.equal(LogUniformSampler(v, seed=3).draw(100), LogUniformSampler(v, seed=3).draw(100))
    cand = sampler.sample(20)
    assert len(cand.ids) == 20 and len(set(cand.ids.tolist())) == 20 and cand.num_tries >= 20
    assert torch.allclose(cand.expected, (1 - (1 - sampler.probability(cand.ids)) ** cand.num_tries).float())
    everything = sampler.sample(v)
    assert torch.equal(everything.ids, torch.arange(v)) and bool((everything.expected == 1).all())


# --------------------------------------------------------------------------------------- data
def test_vocab_round_trip(tmp_path: Path) -> None:
    vocab = SoftmaxVocab.from_counts({"b": 3, "a": 3, "c": 5, "<S>": 9, "z": 1}, size=6)
    assert vocab.tokens == [*SPECIALS, "c", "a", "b"] and vocab.id("z") == UNK_ID
    vocab.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_text() == "<S>\n</S>\n<UNK>\nc\na\nb\n"
    assert SoftmaxVocab.load(tmp_path / "vocab.txt").tokens == vocab.tokens
    (tmp_path / "bad.txt").write_text("a\nb\nc\n")
    with pytest.raises(ValueError, match="bad.txt: a softmax vocabulary must start with"):
        SoftmaxVocab.load(tmp_path / "bad.txt")
    (tmp_path / "latin1.txt").write_bytes(b"<S>\n</S>\n<UNK>\ncaf\xe9\n")  # one line, no traceback
    with pytest.raises(NerAppError, match=r"latin1.txt:4: byte 4 \(0xe9\) is not UTF-8"):
        SoftmaxVocab.load(tmp_path / "latin1.txt")
    assert not list(tmp_path.glob(".*.tmp"))  # saved by one atomic rename: no temporary file left


def test_read_corpus(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("a b\nc\n\n\nb a a\n\nd\n\n")
    corpus = read_corpus(path)
    words = [corpus.types[i] for i in corpus.tokens]
    assert words == "<S> a b </S> <S> c </S> <S> b a a </S> <S> d </S>".split()
    assert corpus.offsets.tolist() == [0, 4, 7, 12, 15] and corpus.documents.tolist() == [0, 2, 3]
    assert corpus.counts()["a"] == 3
    assert read_corpus(path, max_tokens=5).num_sentences == 2  # stops after the sentence that reaches 5
    with pytest.raises(OSError, match="missing.txt: cannot read corpus"):
        read_corpus(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(ValueError, match="empty.txt: no sentences"):
        read_corpus(tmp_path / "empty.txt")


def test_pack_shuffles_sentences_or_documents(tmp_path: Path) -> None:
    corpus = read_corpus(write_grammar(tmp_path / "g.txt", 60, seed=0, doc_every=5))
    bounds = zip(corpus.offsets[:-1], corpus.offsets[1:], strict=True)
    sentences = [tuple(corpus.tokens[a:b]) for a, b in bounds]
    for mode in ("sentences", "documents"):
        flat = pack(corpus, mode, seed=1, epoch=0)
        assert np.array_equal(flat, pack(corpus, mode, seed=1, epoch=0))
        assert not np.array_equal(flat, pack(corpus, mode, seed=1, epoch=1))
        assert sorted(flat.tolist()) == sorted(corpus.tokens.tolist())
    # Sentences move as wholes; documents keep their five sentences together and in order.
    flat = pack(corpus, "sentences", seed=1, epoch=0)
    cuts = np.flatnonzero(flat == corpus.types.index("<S>")).tolist() + [len(flat)]
    assert sorted(tuple(flat[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)) == sorted(sentences)
    flat = pack(corpus, "documents", seed=1, epoch=0).tolist()
    first_doc = [t for s in sentences[:5] for t in s]
    assert any(flat[i : i + len(first_doc)] == first_doc for i in range(len(flat)))


def test_stream_windows_reassemble_and_targets(tmp_path: Path) -> None:
    corpus = read_corpus(write_grammar(tmp_path / "g.txt", 40, seed=0))
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=12)  # small, so that <UNK> targets occur
    batches = StreamBatches(corpus, vocab, batch_size=3, unroll_steps=7, seed=5)
    streams = batches.streams(0)[:, 1:-1]  # (B, S) type ids
    b, s = streams.shape
    # S = 19 x 7 + 1: the last column is no input forward (nothing follows it), the first none backward
    assert b == 3 and s == len(corpus.tokens) // 3 and s % 7 == 1 and len(batches) == (s - 1) // 7
    windows = list(batches)
    assert [w["window"] for w in windows] == list(range(len(batches)))
    table = torch.tensor([token_to_ids(t) for t in corpus.types])
    to_softmax = torch.tensor([vocab.id(t) for t in corpus.types])
    for direction, order in (("forward", windows), ("backward", windows[::-1])):
        chars = torch.cat([w[direction]["char_ids"] for w in order], dim=1)  # (B, S - 1, 50)
        targets = torch.cat([w[direction]["targets"] for w in order], dim=1)  # (B, S - 1)
        ids = torch.from_numpy(streams.astype(np.int64))
        read = slice(0, s - 1) if direction == "forward" else slice(1, s)  # the columns that have a target
        assert torch.equal(chars, table[ids[:, read]])  # the windows of row i reassemble stream i
        assert all(bool(w[direction]["mask"].all()) for w in windows)
        shift = 1 if direction == "forward" else -1
        other = torch.roll(ids, -shift, dims=1)  # the next (forward) or previous (backward) token
        expected = to_softmax[other]
        seam = corpus.types.index("<S>" if direction == "forward" else "</S>")
        expected[other == seam] = IGNORE  # </S> -> <S> between packed sentences is certain: not trained
        assert torch.equal(targets, expected[:, read])
    assert (torch.cat([w["forward"]["targets"] for w in windows], 1) == UNK_ID).any()
    # Windows keep their row: window k's first token follows window k-1's last token in the same row.
    first_of_window_1 = table[torch.from_numpy(streams[:, 7].astype(np.int64))]
    assert torch.equal(windows[1]["forward"]["char_ids"][:, 0], first_of_window_1)


@pytest.mark.parametrize("unroll_steps", range(2, 12))
def test_every_window_has_targets_and_every_target_is_read_once(tmp_path: Path, unroll_steps: int) -> None:
    """Whatever the stream length S modulo the window T (S = qT + 1 left a last window of one column, whose only
    targets lie beyond the stream: a loss of 0 / 0), each window holds targets in both directions and the
    windows together hold each direction's S - 1 targets exactly once."""
    corpus = read_corpus(
        write_grammar(tmp_path / "g.txt", 15, seed=1)
    )  # S = 73: 73 % T = 1 for T = 2, 3, 4, 6, 8, 9
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=50)
    batches = StreamBatches(corpus, vocab, batch_size=2, unroll_steps=unroll_steps, seed=0)
    s = batches.stream_length
    windows = list(batches)
    assert len(windows) == math.ceil((s - 1) / unroll_steps)
    streams = torch.from_numpy(batches.streams(0)[:, 1:-1].astype(np.int64))  # (B, S)
    to_softmax = torch.tensor([vocab.id(t) for t in corpus.types])
    for direction, order in (("forward", windows), ("backward", windows[::-1])):
        assert all(bool((w[direction]["targets"] != IGNORE).any()) for w in windows), (s, unroll_steps)
        targets = torch.cat([w[direction]["targets"] for w in order], dim=1)  # (B, n): n is S - 1 or S
        n = targets.shape[1]
        assert n in (s - 1, s)
        other = torch.roll(streams, -1 if direction == "forward" else 1, dims=1)
        expected = to_softmax[other]
        expected[:, -1 if direction == "forward" else 0] = IGNORE  # nothing beyond the stream's ends
        expected[other == corpus.types.index("<S>" if direction == "forward" else "</S>")] = IGNORE
        assert torch.equal(targets, expected[:, :n] if direction == "forward" else expected[:, s - n :])


def test_stream_resume_position(tmp_path: Path) -> None:
    corpus = read_corpus(write_grammar(tmp_path / "g.txt", 40, seed=0))
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=50)
    batches = StreamBatches(corpus, vocab, batch_size=2, unroll_steps=5, shuffle="documents", seed=1)
    full = list(batches) + list(batches)  # two epochs
    assert full[0]["epoch"] == 0 and full[len(batches)]["epoch"] == 1
    batches.mark_consumed(1, 3)
    resumed = StreamBatches(corpus, vocab, batch_size=2, unroll_steps=5, shuffle="documents", seed=1)
    resumed.load_state_dict(batches.state_dict())
    rest = list(resumed)
    assert [(w["epoch"], w["window"]) for w in rest] == [(1, k) for k in range(4, len(batches))]
    assert torch.equal(rest[0]["forward"]["char_ids"], full[len(batches) + 4]["forward"]["char_ids"])


def test_read_sentences_text_and_conll(tmp_path: Path) -> None:
    text = tmp_path / "t.txt"
    text.write_text("a b c\n\nd e\n")
    assert read_sentences(text) == [["a", "b", "c"], ["d", "e"]]
    conll = tmp_path / "c.txt"
    conll.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP B-PER\n")
    assert read_sentences(conll) == [["EU", "rejects"], ["Peter"]]
    vocab = SoftmaxVocab([*SPECIALS, "a", "b"])
    (batch,) = sentence_batches([["a", "x"], ["b"]], vocab, batch_size=4)
    assert batch["targets"].tolist() == [[0, 4, 1, IGNORE], [0, 3, 2, 1]]  # sorted by length
    assert torch.equal(batch["char_ids"], batch_to_ids([["b"], ["a", "x"]]))


# -------------------------------------------------------------------------------------- model
def tiny_module(dropout: float = 0.0) -> BilmLanguageModel:
    cfg = load_config(REPO / "configs" / "bilm_tiny.yaml", schema=BilmPretrainConfig)
    from ner_app.pretrain.run import bilm_options

    torch.manual_seed(0)
    return BilmLanguageModel(bilm_options(cfg).to_dict(), vocab_size=30, num_sampled=8, dropout=dropout)


def test_direction_stacks_match_elmo_lstm_and_carry_state() -> None:
    module = tiny_module()
    lstm = module.bilm.lstm
    x = torch.randn(3, 12, module.bilm.projection_dim)
    p = module.bilm.projection_dim
    reference = lstm(x, torch.ones(3, 12, dtype=torch.bool))[-1]  # (B, T, 2P), zero state

    def top(direction: str, window: torch.Tensor, fresh: bool) -> torch.Tensor:
        if fresh:
            module.states = {"forward": None, "backward": None}
        return module.direction_top(direction, window)

    fwd, bwd = top("forward", x, True), top("backward", x, True)
    assert torch.allclose(fwd, reference[..., :p], atol=1e-6)
    assert torch.allclose(bwd, reference[..., p:], atol=1e-6)
    # Carrying the state across two windows is running the whole stream at once, row by row.
    first, second = top("forward", x[:, :5], True), top("forward", x[:, 5:], False)
    assert torch.allclose(torch.cat([first, second], 1), fwd, atol=1e-6)
    # The backward LM reads its windows from the end of the stream: the same holds right to left.
    last, before = top("backward", x[:, 7:], True), top("backward", x[:, :7], False)
    assert torch.allclose(torch.cat([before, last], 1), reference[..., p:], atol=1e-6)


def stream_tops(
    module: BilmLanguageModel, stream: list[str], cut: int, reset: bool
) -> dict[str, torch.Tensor]:
    """Both directions' top layers (1, T, P) over a stream of tokens read as two windows, state carried."""
    x = module.embed(batch_to_ids([stream]), torch.ones(1, len(stream), dtype=torch.bool))  # (1, T, P)
    tops = {}
    for direction, start in (("forward", "<S>"), ("backward", "</S>")):
        resets = torch.tensor([[token == start for token in stream]]) if reset else None
        parts = [
            (x[:, :cut], resets[:, :cut] if reset else None),
            (x[:, cut:], resets[:, cut:] if reset else None),
        ]
        if direction == "backward":  # the backward LM reads the later window first
            parts.reverse()
        module.states = {"forward": None, "backward": None}
        outs = [module.direction_top(direction, part, r) for part, r in parts]
        tops[direction] = torch.cat(outs if direction == "forward" else outs[::-1], dim=1)
    return tops


def test_sentence_reset_trains_each_sentence_as_the_stateless_bilm_computes_it() -> None:
    module = tiny_module().eval()
    sentences = [["the", "big", "cat"], ["a", "dog", "sees", "the", "fish", "."], ["old"]]
    stream = [token for words in sentences for token in ["<S>", *words, "</S>"]]
    p = module.bilm.projection_dim
    with torch.no_grad():
        tops = stream_tops(module, stream, cut=7, reset=True)  # the cut falls inside the second sentence
        carried = stream_tops(module, stream, cut=7, reset=False)
        offset = 0
        for words in sentences:
            alone = module.bilm(batch_to_ids([words])).layers[-1][0]  # (n + 2, 2P), <S> .. </S>
            span = slice(offset, offset + len(words) + 2)
            torch.testing.assert_close(tops["forward"][0, span], alone[:, :p], atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(tops["backward"][0, span], alone[:, p:], atol=1e-6, rtol=1e-5)
            offset += len(words) + 2
    # Without the reset the state runs on across sentences: the forward LM's second sentence differs, and so
    # does the backward LM's first (which it reads after the second).
    second = slice(5, 13)
    assert (carried["forward"][0, second] - tops["forward"][0, second]).abs().max() > 1e-3
    assert (carried["backward"][0, :5] - tops["backward"][0, :5]).abs().max() > 1e-3


def test_stream_batches_mark_each_directions_sentence_starts(tmp_path: Path) -> None:
    corpus = read_corpus(write_grammar(tmp_path / "g.txt", 12, seed=1))
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=30)
    batches = StreamBatches(corpus, vocab, batch_size=2, unroll_steps=5)
    for k in range(len(batches)):
        batch = batches.batch(0, k)
        for direction, start in (("forward", "<S>"), ("backward", "</S>")):
            part = batch[direction]
            expected = (part["char_ids"] == torch.tensor(token_to_ids(start))).all(-1)  # (B, T)
            assert torch.equal(part["resets"], expected)


def test_training_step_carries_detached_state(tmp_path: Path) -> None:
    corpus = read_corpus(write_grammar(tmp_path / "g.txt", 30, seed=0))
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=30)
    batches = list(StreamBatches(corpus, vocab, batch_size=4, unroll_steps=6))
    module = tiny_module(dropout=0.1)
    module.log = module.log_dict = lambda *a, **k: None  # no trainer attached
    loss = module.training_step(batches[0], 0)
    loss.backward()
    assert torch.isfinite(loss) and module.bilm.lstm.forward_layers[0].input_linearity.weight.grad is not None
    h, c = module.states["backward"][-1]
    assert h.shape == (4, module.bilm.projection_dim) and not h.requires_grad and not c.requires_grad
    module.training_step(batches[1], 1)
    assert module.states["forward"] is not None
    module.training_step(batches[0], 0)  # window 0: a new epoch starts from zero state
    module.eval()
    result = evaluate(module, sentence_batches([["the", "cat"], ["a"]], vocab, 8))
    assert result["predicted_tokens"] == 5 and result["mean"] > 1


@pytest.mark.system
def test_tiny_pretraining_learns_the_grammar_and_exports(tmp_path: Path) -> None:
    """The reference's own check: a tiny LM on a tiny synthetic corpus gets held-out perplexity below 20."""
    corpus = write_grammar(tmp_path / "train.txt", 1500, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 100, seed=1)
    overrides = tiny_overrides(tmp_path, corpus, [heldout], steps=120)
    cfg = load_config(REPO / "configs" / "bilm_tiny.yaml", overrides, schema=BilmPretrainConfig)
    metrics = run_pretraining(cfg)
    result = metrics["heldout"]["heldout.txt"]
    # Uniform over the 15 words + 3 specials would be 18; the grammar's own perplexity is about 2.
    assert result["mean"] < 5 and result["forward"] < 6 and result["backward"] < 6, result
    assert metrics["steps"] == 120 and metrics["train_tokens_per_s"] > 0
    run = tmp_path / "run"
    module = BilmLanguageModel.load_from_checkpoint(run / "checkpoints" / "last.ckpt", map_location="cpu")
    module.eval()
    loaded = load_bilm(run / "options.json", run / "weights.hdf5").eval()
    ids = batch_to_ids([["the", "big", "cat", "sees", "a", "dog", "."], ["a", "fish"]])
    with torch.no_grad():
        for mine, theirs in zip(module.bilm(ids).layers, loaded(ids).layers, strict=True):
            assert torch.equal(mine, theirs)
    with h5py.File(run / "softmax.hdf5", "r") as f:
        assert np.array_equal(f["softmax/W"][...], module.softmax.W.detach().numpy())
        assert np.array_equal(f["softmax/b"][...], module.softmax.b.detach().numpy())
    assert SoftmaxVocab.load(run / "vocab.txt").tokens[:3] == list(SPECIALS)


def test_cli_end_to_end_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 200, seed=0)
    conll = tmp_path / "valid.txt"
    conll.write_text("-DOCSTART- -X- O O\n\nthe DT I-NP O\ncat NN I-NP B-PER\n. . O O\n\n")
    overrides = tiny_overrides(tmp_path, corpus, [conll], steps=6)
    args = ["pretrain-bilm", "--config", str(REPO / "configs" / "bilm_tiny.yaml"), "--threads", "1"]
    assert main([*args, *overrides, "train.val_every_n_steps=3"]) == 0
    run = tmp_path / "run"
    for name in ("options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt", "metrics.json", "config.yaml"):
        assert (run / name).is_file(), name
    metrics = PretrainMetrics.read(run / "metrics.json")
    assert metrics.steps == 6
    assert metrics.heldout["valid.txt"].contexts["sentence"]["predicted_tokens"] == 4  # n + 1 per direction
    assert "valid.txt (sentence context): perplexity forward" in capsys.readouterr().out
    vocab = SoftmaxVocab.load(run / "vocab.txt")
    windows = len(StreamBatches(read_corpus(corpus), vocab, batch_size=16, unroll_steps=10))
    assert windows > 6
    assert main([*args, "--resume", *overrides, f"train.max_steps={windows + 2}"]) == 0
    assert PretrainMetrics.read(run / "metrics.json").steps == windows + 2
    # The resumed run went on from window 6 to the end of epoch 0, then 2 windows of epoch 1 (a new shuffle).
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"] == [{"epoch": 1, "window": 2}]
    assert len(checkpoint["carried_states"]["backward"]) == 2  # (h, c) of each of the 2 layers, carried


def test_a_corpus_shorter_than_the_logging_interval_logs_without_a_warning(tmp_path: Path) -> None:
    """bilm_tiny.yaml logs every 10 steps; on a corpus of fewer windows an epoch the interval follows the
    streams: Lightning does not warn about ``log_every_n_steps``, and the loss is logged once an epoch."""
    corpus = write_grammar(tmp_path / "train.txt", 60, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 5, seed=1)
    cfg = load_config(
        REPO / "configs" / "bilm_tiny.yaml",
        tiny_overrides(tmp_path, corpus, [heldout], steps=12),
        schema=BilmPretrainConfig,
    )
    assert cfg.train.log_every_n_steps == 10
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_pretraining(cfg)["steps"] == 12
    messages = [str(w.message) for w in caught]
    assert not any("log_every_n_steps" in m or "logging interval" in m for m in messages), messages
    run = tmp_path / "run"
    windows = len(StreamBatches(read_corpus(corpus), SoftmaxVocab.load(run / "vocab.txt"), 16, 10))
    assert 2 <= windows < 10  # the epoch is shorter than the interval asked for
    with open(run / "logs" / "metrics.csv", newline="", encoding="utf-8") as f:
        logged = [int(r["step"]) for r in csv.DictReader(f) if r.get("train_loss")]
    assert len(logged) == 12 // windows and all(
        b - a == windows for a, b in zip(logged, logged[1:], strict=False)
    ), logged


def test_resume_may_add_early_stopping(tmp_path: Path) -> None:
    """A run started without patience can be continued with it: the stopping rule is not what is trained."""
    corpus = write_grammar(tmp_path / "train.txt", 200, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 5, seed=1)
    overrides = [*tiny_overrides(tmp_path, corpus, [heldout], steps=4), "train.val_every_n_steps=2"]
    args = ["pretrain-bilm", "--config", str(REPO / "configs" / "bilm_tiny.yaml"), "--threads", "1"]
    assert main([*args, *overrides, "train.patience=null"]) == 0
    run = tmp_path / "run"
    assert not (run / "checkpoints" / "best.ckpt").exists()
    assert main([*args, "--resume", *overrides, "train.max_steps=10", "train.patience=2"]) == 0
    metrics = PretrainMetrics.read(run / "metrics.json")
    best = torch.load(run / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    assert 4 < best["global_step"] <= metrics.steps <= 10  # best tracked from the resume on
    assert metrics.exported_step == best["global_step"]


def test_news_config_runs_at_tiny_scale(tmp_path: Path) -> None:
    """``bilm_news.yaml`` as shipped (its architecture, optimiser, sentence resets), a few steps of tiny data."""
    corpus = write_grammar(tmp_path / "train.txt", 60, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 5, seed=1)
    overrides = [*tiny_overrides(tmp_path, corpus, [heldout], steps=3), "train.threads=1"]
    overrides += ["train.max_time_minutes=null", "train.enable_progress_bar=false"]
    assert main(["pretrain-bilm", "--config", str(REPO / "configs" / "bilm_news.yaml"), *overrides]) == 0
    metrics = PretrainMetrics.read(tmp_path / "run" / "metrics.json")
    assert metrics.steps == 3 and metrics.parameters == 2_996_448
    assert math.isfinite(metrics.heldout["heldout.txt"].contexts["sentence"]["mean"])


def test_cli_bad_corpus_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(REPO / "configs" / "bilm_tiny.yaml")
    missing = tmp_path / "nope.txt"
    assert main(["pretrain-bilm", "--config", config, f"data.train={missing}", f"output_dir={tmp_path}"]) == 2
    assert f"error: {missing}: cannot read corpus: No such file or directory" in capsys.readouterr().err
    assert (
        main(["pretrain-bilm", "--config", config, f"data.train={tmp_path}", f"output_dir={tmp_path / 'o'}"])
        == 2
    )
    assert f"error: {tmp_path}: cannot read corpus" in capsys.readouterr().err
    corpus = write_grammar(tmp_path / "train.txt", 20, seed=0)
    bad = ["data.heldout=[/nonexistent/dev.txt]", f"data.train={corpus}", f"output_dir={tmp_path / 'r'}"]
    assert main(["pretrain-bilm", "--config", config, *bad]) == 2
    assert "/nonexistent/dev.txt: cannot read held-out text" in capsys.readouterr().err
    assert main(["pretrain-bilm", "--config", config, "--resume", f"output_dir={tmp_path / 'r'}"]) == 2
    assert "--resume: no checkpoint at" in capsys.readouterr().err


def test_softmax_file_round_trip_and_refusals(tmp_path: Path) -> None:
    """``softmax.hdf5`` has one owner: what ``save_softmax`` writes, ``load_softmax`` reads back exactly."""
    torch.manual_seed(0)
    written = SampledSoftmaxLoss(7, 4, num_sampled=3)
    path = save_softmax(written, tmp_path / "run" / SOFTMAX_FILE)
    assert path.name == "softmax.hdf5" and not list(path.parent.glob(".*.tmp"))
    read = SampledSoftmaxLoss(7, 4, num_sampled=3, seed=1)
    load_softmax(read, path)
    assert torch.equal(read.W, written.W) and torch.equal(read.b, written.b)
    with pytest.raises(NerAppError, match=r"dataset 'softmax/W' has shape \(7, 4\), expected \(8, 4\)"):
        load_softmax(SampledSoftmaxLoss(8, 4, num_sampled=3), path)
    with torch.no_grad():
        written.b[2] = float("nan")
    save_softmax(written, path)
    with pytest.raises(NerAppError, match="dataset 'softmax/b' holds NaN or infinite values"):
        load_softmax(read, path)
