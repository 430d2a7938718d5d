"""Vocabularies, batch encoding, the length-bucketed sampler and ConllDataModule on tiny CoNLL folders."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
import torch

from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.spec import TaggerSizes, TaggerSpec
from ner_app.text.vocab import Vocab, build_char_vocab, build_tag_vocab, build_word_vocab
from ner_app.train.corpus import load_corpus
from ner_app.train.datamodule import ConllDataModule
from ner_app.train.sampler import LengthBucketSampler
from tests.helpers import vocab_spec

TRAIN = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
to TO I-VP O
boycott VB I-VP O
British JJ I-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O

In IN I-PP O
Bonn NNP I-NP I-LOC
Lufthansa-Vertriebsgesellschaftsdirektorin NNP I-NP I-MISC
Deutsche NNP I-NP I-ORG
Bank NNP I-NP I-ORG
AG NNP I-NP B-ORG
met VBD I-VP O
"""
EVAL = """-DOCSTART- -X- -X- O

Peter NNP I-NP I-PER
met VBD I-VP O
Zywiec NNP I-NP I-ORG

Bonn NNP I-NP I-LOC
"""


def write_folder(root: Path, columns: int = 4) -> Path:
    def keep(text: str) -> str:  # 2-column variant: token and tag only
        return "\n".join(" ".join(line.split()[:: 3 if columns == 2 else 1]) for line in text.split("\n"))

    root.mkdir(parents=True, exist_ok=True)
    (root / "train.txt").write_text(keep(TRAIN))
    (root / "valid.txt").write_text(keep(EVAL))
    (root / "test.txt").write_text(keep(EVAL))
    return root


SIZES = TaggerSizes(
    word_dim=4, char_dim=2, char_filters=3, char_width=3, lstm_hidden=4, lstm_layers=1, dropout=0.0
)


def make(
    data_dir: Path | None = None,
    hub_name: str | None = None,
    scheme: str = "BIOES",
    batch_size: int = 2,
    eval_batch_size: int = 2,
    lowercase: bool = True,
    min_word_count: int = 1,
) -> ConllDataModule:
    """Config -> corpus -> spec -> DataModule, as train.py wires them."""
    corpus = load_corpus(str(data_dir) if data_dir else None, hub_name, scheme)
    train = corpus.splits["train"]
    spec = TaggerSpec.from_training_data(
        SIZES,
        train.tokens,
        train.tags,
        corpus.scheme,
        corpus.source_scheme,
        lowercase=lowercase,
        min_word_count=min_word_count,
    )
    return ConllDataModule(corpus, spec, batch_size=batch_size, eval_batch_size=eval_batch_size, seed=0)


# --- vocabularies ---------------------------------------------------------------------------------------


def test_vocab_specials_counts_and_export() -> None:
    vocab = Vocab.from_counter(Counter({"b": 3, "a": 3, "c": 1, "d": 2}), min_count=2)
    assert vocab.itos == ["<pad>", "<unk>", "a", "b", "d"]  # by count, ties alphabetically
    assert (vocab.pad_id, vocab.unk_id, len(vocab)) == (0, 1, 5)
    assert vocab.encode(["d", "c", "a"]) == [4, 1, 2]
    restored = Vocab.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert restored == vocab and restored.encode(["d", "zz"]) == [4, 1]


def test_word_char_and_tag_vocabs() -> None:
    sentences = [["Paris", "is", "PARIS"], ["is"]]
    words = build_word_vocab(sentences, lowercase=True)
    assert words.itos[2:] == ["is", "paris"] and words.encode(["Paris", "London"]) == [3, 1]
    assert build_word_vocab(sentences, lowercase=False).itos[2:] == ["is", "PARIS", "Paris"]
    chars = build_char_vocab(sentences)
    assert set(chars.itos[2:]) == set("ParisPARIS") and chars.encode(["P", "é"])[1] == chars.unk_id
    tags = build_tag_vocab([["B-PER", "E-PER", "O"], ["S-LOC"]], "BIOES")
    assert tags.itos[0] == "O" and tags.itos[1:] == sorted(tags.itos[1:]) and len(tags) == 9
    assert tags.encode(["O", "B-LOC"]) == [0, 1]
    with pytest.raises(KeyError, match="'B-ORG' is not in the vocabulary"):
        tags.encode(["B-ORG"])


# --- encode_batch ---------------------------------------------------------------------------------------


def test_encode_batch_shapes_padding_and_chars() -> None:
    sentences = [["Peter", "x" * 40, "met"], ["Bonn"]]
    words = build_word_vocab(sentences)
    chars = build_char_vocab(sentences)
    tags = build_tag_vocab([["S-PER", "O", "O"], ["S-LOC"]], "BIOES")
    spec = vocab_spec(words, chars, tags.itos)
    batch = encode_batch(sentences, spec, [["S-PER", "O", "O"], ["S-LOC"]], index=[7, 3])
    inputs = batch["features"]
    assert inputs["words"]["ids"].shape == (2, 3) and inputs["words"]["ids"].dtype == torch.long
    assert inputs["chars"]["ids"].shape == (2, 3, 30)  # the 40-char token is cut at 30
    assert inputs["elmo"]["chars"].shape == (2, 3, 50)
    assert torch.equal(inputs["elmo"]["chars"], batch_to_ids(sentences))
    assert batch["mask"].dtype == torch.bool and batch["mask"].tolist() == [[True] * 3, [True, False, False]]
    assert batch["index"].tolist() == [7, 3] and batch["tokens"] == sentences
    assert tags.decode(batch["tags"][0].tolist()) == ["S-PER", "O", "O"]
    padding = ~batch["mask"]
    assert inputs["words"]["ids"][padding].eq(0).all() and inputs["chars"]["ids"][padding].eq(0).all()
    assert inputs["chars"]["ids"][1, 0].tolist()[:5] == chars.encode(list("Bonn")) + [0]
    small = encode_batch([["a", "bb"]], spec)
    assert small["features"]["chars"]["ids"].shape == (1, 2, 2) and "tags" not in small
    assert small["index"].tolist() == [0]
    with pytest.raises(ValueError, match="no empty sentences"):
        encode_batch([["a"], []], spec)


# --- LengthBucketSampler --------------------------------------------------------------------------------

LENGTHS = [(i * 37) % 61 + 1 for i in range(1003)]


@pytest.mark.parametrize("shuffle", [False, True])
def test_sampler_covers_every_index_once(shuffle: bool) -> None:
    sampler = LengthBucketSampler(LENGTHS, batch_size=16, shuffle=shuffle, seed=3, bucket_batches=5)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 63
    assert sorted(i for b in batches for i in b) == list(range(len(LENGTHS)))
    assert sum(len(b) < 16 for b in batches) == 1
    # sorting within chunks of 5 batches: lengths in a batch are far closer than in random batches
    if shuffle:
        random_batches = LengthBucketSampler(LENGTHS, batch_size=16, shuffle=True, seed=3, bucket_batches=1)
        assert mean_spread(batches) < mean_spread(list(random_batches)) / 3


def mean_spread(batches: list[list[int]]) -> float:
    return sum(max(LENGTHS[i] for i in b) - min(LENGTHS[i] for i in b) for b in batches) / len(batches)


def test_sampler_without_shuffle_is_sorted() -> None:
    batches = list(LengthBucketSampler(LENGTHS, batch_size=10, shuffle=False, seed=0))
    flat = [i for b in batches for i in b]
    assert [LENGTHS[i] for i in flat] == sorted(LENGTHS)


def test_sampler_is_deterministic_per_seed_and_epoch() -> None:
    a = LengthBucketSampler(LENGTHS, batch_size=8, shuffle=True, seed=5)
    b = LengthBucketSampler(LENGTHS, batch_size=8, shuffle=True, seed=5)
    assert list(a) == list(b) == list(a)
    epoch0 = list(a)
    a.set_epoch(1)
    assert list(a) != epoch0
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(LengthBucketSampler(LENGTHS, batch_size=8, shuffle=True, seed=6)) != epoch0


def test_sampler_drop_last() -> None:
    sampler = LengthBucketSampler(LENGTHS, batch_size=16, shuffle=True, seed=0, drop_last=True)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 62 and all(len(b) == 16 for b in batches)


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_shards_training_batches_disjointly_across_ranks(world: int, drop_last: bool) -> None:
    def shard(rank: int, epoch: int) -> list[list[int]]:
        sampler = LengthBucketSampler(
            LENGTHS, 16, shuffle=True, seed=5, drop_last=drop_last, num_replicas=world, rank=rank
        )
        sampler.set_epoch(epoch)
        assert len(list(sampler)) == len(sampler)
        return list(sampler)

    single = LengthBucketSampler(LENGTHS, 16, shuffle=True, seed=5, drop_last=drop_last)
    for epoch in (0, 1):
        single.set_epoch(epoch)
        shards = [shard(rank, epoch) for rank in range(world)]
        assert shards == [shard(rank, epoch) for rank in range(world)]  # same seed and epoch: same order
        assert len({len(s) for s in shards}) == 1  # every rank runs the same number of steps
        seen = [i for s in shards for b in s for i in b]
        assert len(seen) == len(set(seen))  # disjoint
        kept = list(single)[: len(shards[0]) * world]  # the single-process epoch, cut to a multiple of world
        assert sorted(seen) == sorted(i for b in kept for i in b)
        assert [b for round_ in zip(*shards, strict=True) for b in round_] == kept  # round-robin order
    assert shard(0, 0) != shard(0, 1)


@pytest.mark.parametrize("world", [2, 3])
def test_sampler_evaluation_shards_cover_everything(world: int) -> None:
    shards = [list(LengthBucketSampler(LENGTHS, 16, num_replicas=world, rank=r)) for r in range(world)]
    assert len({len(s) for s in shards}) == 1
    assert sorted({i for s in shards for b in s for i in b}) == list(range(len(LENGTHS)))
    with pytest.raises(ValueError, match="rank must be in"):
        LengthBucketSampler(LENGTHS, 16, num_replicas=2, rank=2)


def test_lightning_sets_the_epoch() -> None:
    from lightning_fabric.utilities.data import _set_sampler_epoch

    loader = torch.utils.data.DataLoader(range(5), batch_sampler=LengthBucketSampler([1] * 5, 2, True, 0))
    _set_sampler_epoch(loader, 4)  # what Lightning's fit loop calls at the start of each epoch
    assert loader.batch_sampler.epoch == 4


# --- ConllDataModule ------------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [4, 2])
def test_datamodule_on_a_tiny_folder(tmp_path: Path, columns: int) -> None:
    dm = make(write_folder(tmp_path / "data", columns))
    assert dm.corpus.source_scheme == "IOB1"
    assert [len(dm.splits[s]) for s in ("train", "dev", "test")] == [4, 2, 2]
    assert dm.splits["train"].source_tags[3][3:6] == ["I-ORG", "I-ORG", "B-ORG"]
    assert dm.splits["train"].tags[3][2:6] == ["S-MISC", "B-ORG", "E-ORG", "S-ORG"]
    assert dm.spec.tag_vocab.itos[0] == "O" and len(dm.spec.tag_vocab) == 17
    assert "zywiec" not in dm.spec.word_vocab and "bonn" in dm.spec.word_vocab  # train only

    batches = list(dm.train_dataloader())
    assert sorted(i for b in batches for i in b["index"].tolist()) == [0, 1, 2, 3]
    for batch in batches:
        size, longest = batch["features"]["words"]["ids"].shape
        lengths = [len(t) for t in batch["tokens"]]
        assert longest == max(lengths)
        assert batch["mask"].sum(1).tolist() == lengths
        assert batch["features"]["chars"]["ids"].shape == (
            size,
            longest,
            min(30, max(len(t) for s in batch["tokens"] for t in s)),
        )
        assert "elmo" not in batch["features"]  # no biLM reads them (a spec without ELMo)
        assert batch["partial"] is False  # every tag annotated
        assert batch["tags"].shape == (size, longest) and batch["tags"][~batch["mask"]].eq(0).all()
        for row, i in enumerate(batch["index"].tolist()):
            assert batch["tokens"][row] == dm.splits["train"].tokens[i]

    val = list(dm.val_dataloader())
    assert [b["index"].tolist() for b in val] == [[1, 0]]  # sorted by length, no shuffle
    assert val[0]["features"]["words"]["ids"][1].tolist() == [
        dm.spec.word_vocab.stoi["peter"],
        dm.spec.word_vocab.stoi["met"],
        1,
    ]
    decoded = dm.spec.decode_tags(val[0]["tags"], val[0]["mask"])
    assert decoded == [["S-LOC"], ["S-PER", "O", "S-ORG"]]
    assert dm.spec.to_source_scheme(decoded) == [["I-LOC"], ["I-PER", "O", "I-ORG"]]
    assert dm.spec.decode_tags([[13], [16, 0, 15]], val[0]["mask"]) == decoded  # CRF-style id lists


def test_datamodule_bio_and_options(tmp_path: Path) -> None:
    dm = make(write_folder(tmp_path / "data"), scheme="BIO", lowercase=False)
    assert "Bonn" in dm.spec.word_vocab and "bonn" not in dm.spec.word_vocab
    assert dm.splits["train"].tags[3][2:6] == ["B-MISC", "B-ORG", "I-ORG", "B-ORG"]
    assert dm.spec.tag_vocab.itos == [
        "O",
        "B-LOC",
        "B-MISC",
        "B-ORG",
        "B-PER",
        "I-LOC",
        "I-MISC",
        "I-ORG",
        "I-PER",
    ]
    rare = make(tmp_path / "data", min_word_count=2)
    assert len(rare.spec.word_vocab) == 2  # no train token occurs twice: only <pad> and <unk>
    assert next(iter(dm.dataloader("dev", batch_size=1)))["features"]["words"]["ids"].shape[0] == 1
    with pytest.raises(KeyError, match="unknown split 'dev2'"):
        dm.dataloader("dev2")


def test_datamodule_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="set data.dir"):
        make()
    write_folder(tmp_path / "data")
    with pytest.raises(ValueError, match="unknown tag scheme 'BILOU'"):
        make(tmp_path / "data", scheme="BILOU")
    (tmp_path / "data" / "test.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"test\.txt: not found"):
        make(tmp_path / "data")


CONLL = (
    Path(os.environ.get("NER_SHARED", Path(__file__).resolve().parents[3] / "shared")) / "data" / "conll2003"
)


@pytest.mark.skipif(
    not (CONLL / "train.txt").is_file(), reason=f"CoNLL-2003 not found in {CONLL} (set NER_SHARED)"
)
def test_real_conll2003() -> None:
    dm = make(CONLL, scheme="BIOES", batch_size=32, eval_batch_size=256)
    assert dm.corpus.source_scheme == "IOB1"
    assert (len(dm.spec.word_vocab), len(dm.spec.char_vocab), len(dm.spec.tag_vocab)) == (21_011, 86, 17)
    valid = dm.splits["dev"]
    predictions: list[list[str]] = [[] for _ in range(len(valid))]
    for batch in dm.val_dataloader():  # the gold tags, decoded and written back in file order
        for i, tags in zip(
            batch["index"].tolist(), dm.spec.decode_tags(batch["tags"], batch["mask"]), strict=True
        ):
            predictions[i] = tags
    assert dm.spec.to_source_scheme(predictions) == valid.source_tags


def test_an_unusual_number_of_entity_types_is_named_in_a_warning(tmp_path: Path, caplog) -> None:
    import logging

    from ner_app.train.corpus import load_corpus

    rows = "\n\n".join(f"w{i} B-T{i}" for i in range(60)) + "\n"
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text(rows)
    with caplog.at_level(logging.WARNING, logger="ner_app"):
        load_corpus(str(tmp_path), None, "BIOES")
    assert "train has 60 entity types (241 tags, a 241 x 241 CRF)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ner_app"):
        load_corpus(str(Path(__file__).resolve().parents[1] / "data" / "tiny_conll"), None, "BIOES")
    assert "entity types" not in caplog.text
