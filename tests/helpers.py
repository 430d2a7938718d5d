"""Helpers the tests share: the ../shared folder (skipped when missing), tiny random biLMs, a synthetic
grammar for pretraining runs. Fixtures live in conftest.py; no test file imports another."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from ner_app.bilm.options import BilmOptions

REPO = Path(__file__).resolve().parents[1]  # the repository root
SHARED = Path(os.environ.get("NER_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test when it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found (set NER_SHARED to the shared data folder)")
    return path


TINY_OPTIONS = BilmOptions(
    char_dim=4, filters=((1, 4), (2, 8), (3, 8)), n_highway=1, activation="relu", lstm_dim=12,
    projection_dim=6, n_layers=2, cell_clip=3.0, proj_clip=3.0, use_skip_connections=True,
)  # fmt: skip


def random_bilm(options: BilmOptions = TINY_OPTIONS, seed: int = 0, scale: float = 0.5):
    """A biLM with random weights large enough that clipping and every gate matter."""
    torch.manual_seed(seed)
    bilm = options.build()
    with torch.no_grad():
        for p in bilm.parameters():
            p.uniform_(-scale, scale)
        bilm.token_encoder.char_cnn.char_embed.weight[0].zero_()
    return bilm.eval()


NOUNS, ADJS, VERBS = ["cat", "dog", "bird", "fish"], ["big", "small", "red", "old"], ["sees", "likes", "eats"]


def grammar_sentence(rng: random.Random) -> str:
    """A sentence of a small synthetic grammar over 15 words: an LM can learn it far below uniform perplexity."""
    words = ["the", rng.choice(ADJS), rng.choice(NOUNS), rng.choice(VERBS), "a", rng.choice(NOUNS)]
    if rng.random() < 0.3:
        words += ["and", "the", rng.choice(NOUNS), rng.choice(VERBS)]
    return " ".join([*words, "."])


def write_grammar(path: Path, sentences: int, seed: int, doc_every: int = 7) -> Path:
    rng = random.Random(seed)
    # A blank line after every doc_every sentences starts a new document.
    ends = ["\n\n" if i % doc_every == doc_every - 1 else "\n" for i in range(sentences)]
    lines = [grammar_sentence(rng) + end for end in ends]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def tiny_overrides(tmp_path: Path, corpus: Path, heldout: list[Path], steps: int) -> list[str]:
    return [
        f"output_dir={tmp_path / 'run'}", f"data.train={corpus}", f"data.heldout=[{', '.join(map(str, heldout))}]",
        "data.vocab_size=50", "data.heldout_max_sentences=null", "data.max_train_tokens=null",
        f"train.max_steps={steps}", "train.batch_size=16", "train.unroll_steps=10", "train.n_negative_samples=8",
        "train.lr=0.02", "train.val_every_n_steps=50",
    ]  # fmt: skip
