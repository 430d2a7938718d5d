"""The token budget of every batch: ``budget_batches``, ``LengthBucketSampler`` with ``max_tokens`` (against the
sampler's batches before budgets existed), ``ConllDataModule`` and the config keys."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ner_app.config.checks import check_train_config
from ner_app.config.load import load_config
from ner_app.errors import NerAppError
from ner_app.tagger.spec import TaggerSizes, TaggerSpec
from ner_app.text.batching import batch_capacity, budget_batches
from ner_app.train.corpus import load_corpus
from ner_app.train.datamodule import EVAL_MAX_TOKENS, TRAIN_MAX_TOKENS, ConllDataModule
from ner_app.train.sampler import LengthBucketSampler

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
# mostly short sentences, a few long ones, one far longer than any budget below
LENGTHS = [(i * 37) % 61 + 1 for i in range(700)] + [200, 350, 900, 120, 5000]
random.Random(0).shuffle(LENGTHS)


def todays_batches(
    lengths: list[int],
    size: int,
    shuffle: bool,
    seed: int,
    epoch: int,
    drop_last: bool,
    bucket_batches: int = 50,
) -> list[list[int]]:
    """The sampler's batches before the budget (the oracle of 'no budget changes nothing')."""
    key = lengths.__getitem__
    if not shuffle:
        order = sorted(range(len(lengths)), key=key)
        batches = [order[i : i + size] for i in range(0, len(order), size)]
    else:
        rng = random.Random(seed + epoch)
        perm = list(range(len(lengths)))
        rng.shuffle(perm)
        batches = []
        for start in range(0, len(perm), size * bucket_batches):
            part = sorted(perm[start : start + size * bucket_batches], key=key)
            batches.extend(part[i : i + size] for i in range(0, len(part), size))
        rng.shuffle(batches)
    return [b for b in batches if len(b) == size] if drop_last else batches


def check_bounded(batches: list[list[int]], lengths: list[int], budget: int, size: int | None) -> None:
    """Every index once, at most ``size`` a batch, and B x T_max within the budget unless alone."""
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert batch and (size is None or len(batch) <= size)
        assert len(batch) == 1 or len(batch) * max(max(lengths[i], 1) for i in batch) <= budget, batch


@pytest.mark.parametrize("keep_order", [False, True])
@pytest.mark.parametrize("size", [None, 1, 16])
@pytest.mark.parametrize("budget", [1, 64, 1000, 10**9])
def test_budget_batches_keep_every_batch_within_the_budget(keep_order, size, budget):
    batches = budget_batches(LENGTHS, size, budget, keep_order)
    check_bounded(batches, LENGTHS, budget, size)
    flat = [i for b in batches for i in b]
    if keep_order:
        assert flat == list(range(len(LENGTHS)))
    else:
        assert [LENGTHS[i] for i in flat] == sorted(LENGTHS)
    if budget == 10**9 and size is not None:  # a budget that never binds: slices of size
        assert [len(b) for b in batches] == [size] * (len(LENGTHS) // size) + [len(LENGTHS) % size] * (
            len(LENGTHS) % size > 0
        )


def test_budget_batches_empty_sentences_and_bad_caps():
    assert budget_batches([0, 0, 3], None, 2) == [[0, 1], [2]]  # an empty sentence still costs one row
    assert budget_batches([], 4, 10) == []
    for size, budget in ((0, 10), (4, 0), (4, -1)):
        with pytest.raises(ValueError, match="must be at least 1"):
            budget_batches([1], size, budget)


def test_capacity_is_the_batch_size_unless_the_budget_binds():
    assert batch_capacity(124, 64, 8192) == 64  # every CoNLL-2003 sentence
    assert batch_capacity(129, 64, 8192) == 32  # 63 would fit: the largest power of two below
    assert batch_capacity(3000, 64, 8192) == 2 and batch_capacity(9000, 64, 8192) == 1
    assert batch_capacity(10**6, 64, None) == 64


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_no_budget_or_a_budget_that_never_binds_gives_todays_batches(shuffle, drop_last):
    for size in (1, 7, 16):
        roomy = size * max(LENGTHS)
        for budget in (None, roomy):
            sampler = LengthBucketSampler(
                LENGTHS, size, shuffle, seed=3, drop_last=drop_last, max_tokens=budget
            )
            for epoch in (0, 1, 2):
                sampler.set_epoch(epoch)
                expected = todays_batches(LENGTHS, size, shuffle, 3, epoch, drop_last)
                assert list(sampler) == expected and len(sampler) == len(expected)


def test_the_default_budgets_split_no_conll_batch():
    """CoNLL-2003 sentences have at most 124 tokens: batches of 64 (training) and 256 (evaluation) fit."""
    assert (
        batch_capacity(124, 64, TRAIN_MAX_TOKENS) == 64 and batch_capacity(124, 256, EVAL_MAX_TOKENS) == 256
    )


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("budget", [300, 1000])
def test_the_budget_bounds_every_batch_and_a_long_sentence_runs_alone(shuffle, budget):
    sampler = LengthBucketSampler(LENGTHS, 16, shuffle, seed=5, bucket_batches=3, max_tokens=budget)
    longest = LENGTHS.index(5000)
    counts = set()
    for epoch in range(4):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        check_bounded(batches, LENGTHS, budget, 16)
        assert [longest] in batches
        counts.add(len(batches))
        assert len(sampler) == len(batches)  # Lightning counts an epoch's batches once, before it starts
    assert len(counts) == 1
    if shuffle:  # still shuffled and still bucketed
        sampler.set_epoch(0)
        first = list(sampler)
        sampler.set_epoch(1)
        assert list(sampler) != first
        assert (
            list(LengthBucketSampler(LENGTHS, 16, True, seed=5, bucket_batches=3, max_tokens=budget)) == first
        )


def test_drop_last_with_a_budget_drops_only_short_batches():
    sampler = LengthBucketSampler(LENGTHS, 16, True, seed=1, drop_last=True, max_tokens=1000)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert all(len(b) == batch_capacity(max(LENGTHS[i] for i in b), 16, 1000) for b in batches)
    ordered = list(LengthBucketSampler(LENGTHS, 16, drop_last=True, max_tokens=1000))
    assert len({i for b in ordered for i in b}) >= len(LENGTHS) - 16


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_ddp_shares_stay_disjoint_under_a_budget(world, shuffle):
    def shard(rank: int) -> list[list[int]]:
        sampler = LengthBucketSampler(
            LENGTHS, 16, shuffle, seed=2, num_replicas=world, rank=rank, max_tokens=700
        )
        sampler.set_epoch(1)
        assert len(list(sampler)) == len(sampler)
        return list(sampler)

    shards = [shard(rank) for rank in range(world)]
    assert len({len(s) for s in shards}) == 1  # every rank runs the same number of steps
    for s in shards:
        assert all(len(b) == 1 or len(b) * max(LENGTHS[i] for i in b) <= 700 for b in s)
    seen = [i for s in shards for b in s for i in b]
    if shuffle:
        assert len(seen) == len(set(seen))  # disjoint
    else:  # evaluation repeats its first batches to fill the last round, and covers everything
        assert set(seen) == set(range(len(LENGTHS)))


def test_budget_and_keep_order_for_streams_in_input_order():
    sampler = LengthBucketSampler(LENGTHS, 16, max_tokens=500, keep_order=True)
    batches = list(sampler)
    assert [i for b in batches for i in b] == list(range(len(LENGTHS)))
    check_bounded(batches, LENGTHS, 500, 16)
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        LengthBucketSampler(LENGTHS, 16, max_tokens=0)


# --- ConllDataModule and the config keys ------------------------------------------------------------------


def long_corpus(tmp_path: Path, tokens: int) -> Path:
    """The tiny corpus with one more sentence of ``tokens`` tokens in valid.txt and test.txt."""
    folder = tmp_path / "data"
    folder.mkdir()
    words = ["Peter", "met", "Bonn", "in", "the", "EU", "."]
    tags = ["I-PER", "O", "I-LOC", "O", "O", "I-ORG", "O"]
    long = "\n".join(f"{words[i % 7]} X X {tags[i % 7]}" for i in range(tokens))
    for name in ("train", "valid", "test"):
        text = (TINY / f"{name}.txt").read_text(encoding="utf-8").rstrip("\n")
        (folder / f"{name}.txt").write_text(text + ("" if name == "train" else f"\n\n{long}") + "\n")
    return folder


def test_datamodule_batches_keep_to_the_budgets(tmp_path):
    corpus = load_corpus(str(long_corpus(tmp_path, 400)), None, "BIOES")
    sizes = TaggerSizes(
        word_dim=4, char_dim=2, char_filters=3, char_width=3, lstm_hidden=4, lstm_layers=1, dropout=0.0
    )
    train = corpus.splits["train"]
    spec = TaggerSpec.from_training_data(sizes, train.tokens, train.tags, corpus.scheme, corpus.source_scheme)
    dm = ConllDataModule(corpus, spec, batch_size=4, eval_batch_size=64, max_tokens=40, eval_max_tokens=100)
    for split, budget in (("train", 40), ("dev", 100), ("test", 100)):
        loader = dm.dataloader(split, shuffle=split == "train")
        shapes = [tuple(b["features"]["words"]["ids"].shape) for b in loader]
        assert sum(n for n, _ in shapes) == len(corpus.splits[split].tokens)
        assert len(shapes) == len(loader.batch_sampler)
        assert all(n == 1 or n * t <= budget for n, t in shapes), shapes
        assert all(
            b["features"]["chars"]["ids"].shape[0] * b["features"]["chars"]["ids"].shape[1]
            <= max(budget, 400)
            for b in loader
        )
    assert (1, 400) in [
        tuple(b["features"]["words"]["ids"].shape) for b in dm.val_dataloader()
    ]  # the long sentence alone
    same = ConllDataModule(
        corpus, spec, batch_size=4, eval_batch_size=64, max_tokens=None, eval_max_tokens=None
    )
    assert (
        max(b["features"]["words"]["ids"].shape[0] for b in same.val_dataloader()) > 1
    )  # no budget: it shares its batch


def test_config_keys_default_and_bad_values(tmp_path):
    cfg = load_config(ROOT / "configs/tiny.yaml")
    assert (cfg.data.max_tokens_per_batch, cfg.data.eval_max_tokens_per_batch) == (8192, 32768)
    for key in ("max_tokens_per_batch", "eval_max_tokens_per_batch"):
        check_train_config(load_config(ROOT / "configs/tiny.yaml", [f"data.{key}=null"]))
        for bad in ("0", "-5", "1.5", "abc", "true"):
            with pytest.raises(NerAppError) as err:
                check_train_config(load_config(ROOT / "configs/tiny.yaml", [f"data.{key}={bad}"]))
            assert f"data.{key}" in str(err.value) and "\n" not in str(err.value)
