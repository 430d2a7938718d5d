"""biLM pretraining under Lightning's DDP: each process's share of the streams and of the held-out batches, and
``bilm_tiny`` with 2 CPU processes (gloo) against one process reading the same streams."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from ner_app.cli.commands import main
from ner_app.config.load import BilmPretrainConfig, load_config
from ner_app.pretrain.data import read_corpus
from ner_app.pretrain.documents import read_sentences
from ner_app.pretrain.heldout import sentence_batches, shard_batches
from ner_app.pretrain.metrics import PretrainMetrics
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.perplexity import evaluate
from ner_app.pretrain.run import run_pretraining
from ner_app.pretrain.streams import StreamBatches, stream_rows
from ner_app.pretrain.vocab import SoftmaxVocab
from tests.helpers import write_grammar

pytestmark = pytest.mark.system  # starts pretraining processes: out of the fast lane

REPO = Path(__file__).resolve().parents[2]
STEPS = 60  # a run of STEPS, or STEPS // 2 then --resume to STEPS


# ------------------------------------------------------------------------------------------ shares
@pytest.mark.parametrize(
    ("num_tokens", "batch_size", "world"), [(100, 3, 2), (1000, 4, 3), (64, 2, 4), (9, 1, 4)]
)
def test_stream_rows_are_disjoint_and_cover_the_stream(num_tokens: int, batch_size: int, world: int) -> None:
    shares = [stream_rows(num_tokens, batch_size, rank, world) for rank in range(world)]
    assert all(s.shape == shares[0].shape for s in shares)  # every process runs the same number of windows
    flat = np.concatenate([s.ravel() for s in shares])
    assert len(np.unique(flat)) == len(flat)  # disjoint
    assert np.array_equal(np.sort(flat), np.arange(len(flat)))  # every kept token, from the start
    assert num_tokens - len(flat) < batch_size * world  # what is dropped is less than one token per stream
    with pytest.raises(ValueError, match=f"rank {world} is not in"):
        stream_rows(num_tokens, batch_size, world, world)


@pytest.mark.parametrize("shuffle", ["sentences", "documents"])
def test_each_process_reads_its_rows_of_the_one_process_streams(tmp_path: Path, shuffle: str) -> None:
    """Process r of W with B streams reads rows rB .. rB + B - 1 of one process with W x B streams, every epoch:
    the same windows, targets and resets, so a DDP step reads what one process with W x B streams reads."""
    corpus = read_corpus(write_grammar(tmp_path / "g.txt", 80, seed=2, doc_every=4))
    vocab = SoftmaxVocab.from_counts(corpus.counts(), size=12)
    whole = StreamBatches(corpus, vocab, batch_size=6, unroll_steps=7, shuffle=shuffle, seed=5)  # type: ignore[arg-type]
    parts = [
        StreamBatches(corpus, vocab, 2, 7, shuffle, seed=5, rank=r, world_size=3)  # type: ignore[arg-type]
        for r in range(3)
    ]
    assert all(len(p) == len(whole) for p in parts)
    for epoch in (0, 1):
        for k in range(len(whole)):
            expected = whole.batch(epoch, k)
            for r, part in enumerate(parts):
                got, rows = part.batch(epoch, k), slice(2 * r, 2 * r + 2)
                for direction in ("forward", "backward"):
                    for key, value in got[direction].items():
                        reference = expected[direction][key]
                        assert (value is None) == (reference is None), key
                        if value is not None:
                            assert torch.equal(value, reference[rows]), (epoch, k, r, direction, key)


def test_shard_batches_cover_once_with_equal_step_counts() -> None:
    batches = [{"x": torch.tensor([i])} for i in range(7)]
    for world in (1, 2, 3, 7, 9):
        shares = [shard_batches(batches, rank, world) for rank in range(world)]
        assert len({len(s) for s in shares}) == 1  # a DDP step is a collective call: same count everywhere
        real = [b for s in shares for b in s if b["index"] >= 0]
        assert sorted(b["index"] for b in real) == list(range(7))  # disjoint and covering
        assert all(int(b["x"]) == b["index"] for b in real)


# --------------------------------------------------------------------------------- 2 CPU processes
def overrides(tmp_path: Path, run: str, batch_size: int, steps: int, dropout: float = 0.0) -> list[str]:
    return [
        f"output_dir={tmp_path / run}",
        f"data.train={tmp_path / 'train.txt'}",
        f"data.heldout=[{tmp_path / 'heldout.txt'}]",
        "data.vocab_size=50",
        "data.heldout_max_sentences=null",
        "data.max_train_tokens=null",
        f"train.batch_size={batch_size}",
        "train.unroll_steps=10",
        "train.n_negative_samples=8",
        "train.lr=0.02",
        f"train.max_steps={steps}",
        f"train.val_every_n_steps={STEPS // 2}",
        "train.eval_batch_size=16",
        "train.threads=1",
        "train.accelerator=cpu",
        f"model.dropout={dropout}",
    ]


def run_ddp(
    tmp_path: Path, run: str, steps: int, resume: bool = False, dropout: float = 0.0
) -> subprocess.CompletedProcess[str]:
    """``pretrain-bilm`` with 2 CPU processes of 4 streams each; Lightning starts rank 1 by running the same
    command again, so it must be a real command line, not pytest."""
    command = [
        sys.executable,
        "-m",
        "ner_app",
        "pretrain-bilm",
        "--config",
        str(REPO / "configs/bilm_tiny.yaml"),
        *(["--resume"] if resume else []),
        *overrides(tmp_path, run, 4, steps, dropout),
        "train.devices=2",
        "train.strategy=ddp",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Starting with 2 processes" in result.stderr + result.stdout
    return result


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    tmp_path = tmp_path_factory.mktemp("ddp")
    write_grammar(tmp_path / "train.txt", 1000, seed=0)
    write_grammar(tmp_path / "heldout.txt", 60, seed=100)
    return tmp_path, run_ddp(tmp_path, "ddp", STEPS)


@pytest.mark.slow
def test_two_processes_pretrain_like_one_and_write_once(ddp_run, capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path, result = ddp_run
    run = tmp_path / "ddp"
    metrics = PretrainMetrics.read(run / "metrics.json")
    assert metrics.processes == 2 and metrics.steps == STEPS
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("metrics.json")) == [
        "ddp/metrics.json"
    ]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["last.ckpt"]
    assert (
        result.stdout.count("heldout.txt (sentence context): perplexity forward") == 1
    )  # rank 0 alone reports
    # The held-out perplexity was computed in shares and gathered: it is one process's number for these weights.
    torch.set_num_threads(1)  # the processes ran one thread each: the same float32 kernels, bit for bit
    module = BilmLanguageModel.load_from_checkpoint(run / "checkpoints" / "last.ckpt", map_location="cpu")
    vocab = SoftmaxVocab.load(run / "vocab.txt")
    alone = evaluate(module, sentence_batches(read_sentences(tmp_path / "heldout.txt"), vocab, 16))
    ddp = metrics.heldout["heldout.txt"].contexts["sentence"]
    assert ddp == alone
    with h5py.File(run / "softmax.hdf5", "r") as f:
        assert np.array_equal(f["softmax/W"][...], module.softmax.W.detach().numpy())
    # One process reading the same 2 x 4 streams (8 of its own) reaches a comparable perplexity.
    cfg = load_config(
        REPO / "configs/bilm_tiny.yaml", overrides(tmp_path, "one", 8, STEPS), schema=BilmPretrainConfig
    )
    one = run_pretraining(cfg)["heldout"]["heldout.txt"]
    # The same streams, negatives and clipping per step, no dropout; what differs is the loss: DDP averages the
    # two processes' mean losses (as bilm-tf averaged its GPUs'), one process takes the mean over all its targets
    # (the counts differ by the </S> -> <S> seams in each share); that, and the float order of the all-reduce,
    # set the trajectories slightly apart. Measured on 3 corpora: at most 2.4% apart (mean: 1.0%); allowed: 5%.
    for key in ("forward", "backward", "mean"):
        assert abs(ddp[key] - one[key]) / one[key] < 0.05, (key, ddp[key], one[key])
    assert ddp["mean"] < 4  # learned: uniform over the 18 softmax rows would be 18, the grammar's own about 2


@pytest.mark.slow  # three runs of 2 processes (about 20 s each on the 2-core host)
def test_two_processes_resume_exactly(tmp_path: Path) -> None:
    """Half the steps, then --resume: every process continues its own streams, carried states and random
    streams (dropout 0.1: each process draws its own masks), so the weights equal the uninterrupted run's."""
    write_grammar(tmp_path / "train.txt", 1000, seed=0)
    write_grammar(tmp_path / "heldout.txt", 20, seed=100)
    run_ddp(tmp_path, "whole", STEPS, dropout=0.1)
    run_ddp(tmp_path, "half", STEPS // 2, dropout=0.1)
    checkpoint = torch.load(tmp_path / "half" / "checkpoints" / "last.ckpt", weights_only=False)
    processes = checkpoint["process_states"]
    states = [p["carried_states"]["forward"][0][0] for p in processes]
    assert len(states) == 2 and not torch.equal(states[0], states[1])  # each process carries its own
    assert not torch.equal(*(p["rng_states"]["torch"] for p in processes))  # and draws its own dropout
    run_ddp(tmp_path, "half", STEPS, resume=True, dropout=0.1)
    whole = torch.load(tmp_path / "whole" / "checkpoints" / "last.ckpt", weights_only=False)
    resumed = torch.load(tmp_path / "half" / "checkpoints" / "last.ckpt", weights_only=False)
    assert resumed["global_step"] == whole["global_step"] == STEPS
    for key, value in whole["state_dict"].items():
        assert torch.equal(resumed["state_dict"][key], value), key
    for name in ("whole", "half"):
        assert PretrainMetrics.read(tmp_path / name / "metrics.json").steps == STEPS


def test_bad_distribution_keys_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 20, seed=0)
    args = ["pretrain-bilm", "--config", str(REPO / "configs/bilm_tiny.yaml"), f"data.train={corpus}"]
    assert main([*args, f"output_dir={tmp_path / 'a'}", "train.devices=0"]) == 2
    assert "config key 'train.devices' is too small" in capsys.readouterr().err
    assert main([*args, f"output_dir={tmp_path / 'b'}", "train.strategy=ddp_spawn"]) == 2
    assert (
        "'train.strategy': 'ddp_spawn' is not supported by pretrain-bilm; use ddp" in capsys.readouterr().err
    )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # refused before the run folder
