"""Batches for the tagger: collate, a length-bucketed batch sampler and the LightningDataModule."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.document import MAX_POSITIONS, document_contexts, document_keys
from ner_app.errors import NerAppError

from .conll import SPLITS, load_hub_splits, load_local_splits
from .schemes import convert, detect_scheme, normalize_scheme
from .vocab import Vocab, build_char_vocab, build_tag_vocab, build_word_vocab

MAX_WORD_CHARS = 30  # the tagger's char CNN sees at most this many characters of a token
_SPLIT_ALIASES = {**{name: name for name in SPLITS}, "validation": "valid", "val": "valid", "dev": "valid"}


def encode_batch(
    sentences: Sequence[Sequence[str]],
    word_vocab: Vocab,
    char_vocab: Vocab,
    tags: Sequence[Sequence[str]] | None = None,
    tag_vocab: Vocab | None = None,
    index: Sequence[int] | None = None,
    max_word_chars: int = MAX_WORD_CHARS,
) -> dict[str, Any]:
    """Tensors for a batch of non-empty tokenised sentences (and their tags in the training scheme).

    Keys: ``words`` (B, T), ``chars`` (B, T, W) with W the longest token capped at ``max_word_chars``,
    ``elmo_chars`` (B, T, 50), ``mask`` (B, T) bool, ``tokens`` (the raw tokens), ``index`` (B,) (default
    0..B-1) and, when ``tags`` are given, ``tags`` (B, T) (0 at padding, which the mask hides).
    """
    lengths = [len(s) for s in sentences]
    if not sentences or min(lengths) == 0:
        raise ValueError("encode_batch needs at least one sentence and no empty sentences")
    batch, longest = len(sentences), max(lengths)
    width = max(1, min(max(len(t) for s in sentences for t in s), max_word_chars))
    # built in numpy: multi-threaded torch fills of small tensors were ~100x slower on a busy 2-core machine
    words = np.zeros((batch, longest), dtype=np.int64)  # (B, T)
    chars = np.zeros((batch, longest, width), dtype=np.int64)  # (B, T, W)
    mask = np.zeros((batch, longest), dtype=bool)  # (B, T)
    for b, sentence in enumerate(sentences):
        n = len(sentence)
        words[b, :n] = word_vocab.encode(sentence)
        mask[b, :n] = True
        for j, token in enumerate(sentence):
            ids = char_vocab.encode(token[:width])
            chars[b, j, : len(ids)] = ids

    out: dict[str, Any] = {
        "words": torch.from_numpy(words),
        "chars": torch.from_numpy(chars),
        "elmo_chars": batch_to_ids(sentences),  # (B, T, 50)
        "mask": torch.from_numpy(mask),
        "tokens": [list(s) for s in sentences],
        "index": torch.tensor(list(index) if index is not None else range(batch), dtype=torch.long),  # (B,)
    }
    if tags is not None:
        if tag_vocab is None:
            raise ValueError("encode_batch got tags but no tag_vocab")
        if [len(t) for t in tags] != lengths:
            raise ValueError("encode_batch: every tag sequence must be as long as its sentence")
        tag_ids = np.zeros((batch, longest), dtype=np.int64)  # (B, T)
        for b, sentence_tags in enumerate(tags):
            tag_ids[b, : len(sentence_tags)] = tag_vocab.encode(sentence_tags)
        out["tags"] = torch.from_numpy(tag_ids)
    return out


class Collator:
    """``collate_fn`` for ``(index, tokens, tags)`` items; a class so that worker processes can pickle it."""

    def __init__(
        self,
        word_vocab: Vocab,
        char_vocab: Vocab,
        tag_vocab: Vocab,
        max_word_chars: int,
        layer_cache: Any = None,
        elmo_contexts: Sequence[Any] | None = None,
        elmo_keys: Sequence[bytes] | None = None,
    ) -> None:
        self.word_vocab, self.char_vocab, self.tag_vocab = word_vocab, char_vocab, tag_vocab
        self.max_word_chars = max_word_chars
        self.layer_cache = layer_cache  # a LayerCache: the frozen biLM's layers come from disk
        # Document context (docs/document_context.md), by dataset index: each sentence's stream and position
        # (the biLM runs on them), or its layer-cache key.
        self.elmo_contexts, self.elmo_keys = elmo_contexts, elmo_keys

    def __call__(self, items: Sequence[tuple[int, list[str], list[str]]]) -> dict[str, Any]:
        index, tokens, tags = zip(*items, strict=True)
        batch = encode_batch(
            tokens, self.word_vocab, self.char_vocab, tags, self.tag_vocab, index, self.max_word_chars
        )
        if self.layer_cache is not None and self.elmo_keys is not None:
            keys = [self.elmo_keys[i] for i in index]
            batch["elmo_layers"], batch["elmo_mask"] = self.layer_cache.lookup_keys(keys, tokens)
        elif self.layer_cache is not None:
            batch["elmo_layers"], batch["elmo_mask"] = self.layer_cache.lookup(tokens)  # L+1 x (B, T+2, 2P)
        elif self.elmo_contexts is not None:
            batch["elmo_context"] = [self.elmo_contexts[i] for i in index]
        return batch


class LengthBucketSampler(Sampler[list[int]]):
    """Batches of sentences of similar length.

    With ``shuffle``: indices are shuffled, cut into chunks of ``bucket_batches`` batches, sorted by length
    within each chunk and cut into batches, and the batches are shuffled; the random generator is seeded
    with ``seed + epoch`` (``set_epoch``), so every epoch is reproducible. Without: batches in increasing
    length order. Every index occurs exactly once (``drop_last`` drops the one short batch, if any).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        drop_last: bool = False,
        bucket_batches: int = 50,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.lengths = list(lengths)
        # private on purpose: Lightning re-creates samplers that have both batch_size and drop_last attributes
        # as cls(sampler, batch_size=..., drop_last=...), which this signature does not follow
        self._batch_size = batch_size
        self._drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        self.bucket_batches = bucket_batches
        self.epoch = 0

    @property
    def sampler(self) -> LengthBucketSampler:
        """Itself: Lightning calls ``set_epoch`` on ``batch_sampler.sampler`` at the start of every epoch."""
        return self

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle of this epoch."""
        self.epoch = epoch

    def batches(self) -> list[list[int]]:
        """The batches of the current epoch."""
        size, key = self._batch_size, self.lengths.__getitem__
        if not self.shuffle:
            order = sorted(range(len(self.lengths)), key=key)  # stable: ties stay in file order
            batches = [order[i : i + size] for i in range(0, len(order), size)]
        else:
            rng = random.Random(self.seed + self.epoch)
            perm = list(range(len(self.lengths)))
            rng.shuffle(perm)
            chunk = size * self.bucket_batches  # a multiple of size: only the very last batch can be short
            batches = []
            for start in range(0, len(perm), chunk):
                part = sorted(perm[start : start + chunk], key=key)
                batches.extend(part[i : i + size] for i in range(0, len(part), size))
            rng.shuffle(batches)
        if self._drop_last:
            batches = [b for b in batches if len(b) == size]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self._batch_size if self._drop_last else math.ceil(n / self._batch_size)


@dataclass
class Split:
    """One split: tokens, tags in the training scheme, the original tags and document indices."""

    tokens: list[list[str]]
    tags: list[list[str]]
    source_tags: list[list[str]]
    docs: list[int]

    def __len__(self) -> int:
        return len(self.tokens)


class _SplitDataset(Dataset):
    def __init__(self, split: Split) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> tuple[int, list[str], list[str]]:
        return i, self.split.tokens[i], self.split.tags[i]


class ConllDataModule(pl.LightningDataModule):
    """CoNLL NER data from a folder (``train.txt``, ``valid.txt``, ``test.txt``) or, when ``hub_name`` is
    set, from the Hugging Face hub; tags are converted to the training ``scheme`` and vocabularies are
    built from train only (``hub_name`` wins when both sources are set). After ``setup()``: ``word_vocab``,
    ``char_vocab``, ``tag_vocab``, ``source_scheme`` (detected on train), ``splits`` and the dataloaders;
    a batch's ``index`` is the position in ``splits[name]`` (file order for local files).
    """

    def __init__(
        self,
        data_dir: str | None = None,
        hub_name: str | None = None,
        scheme: str = "BIOES",
        batch_size: int = 32,
        eval_batch_size: int = 64,
        lowercase: bool = True,
        min_word_count: int = 1,
        num_workers: int = 0,
        seed: int = 0,
        max_word_chars: int = MAX_WORD_CHARS,
        max_sentences: int | None = None,
    ) -> None:
        super().__init__()
        if not data_dir and not hub_name:
            raise NerAppError("set data.dir (a folder with train.txt, valid.txt, test.txt) or data.hub_name")
        normalize_scheme(scheme)  # fail early on an unknown scheme
        self.save_hyperparameters()
        self.data_dir, self.hub_name = data_dir, hub_name
        self.scheme = scheme.upper()
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.lowercase, self.min_word_count = lowercase, min_word_count
        self.num_workers, self.seed, self.max_word_chars = num_workers, seed, max_word_chars
        self.max_sentences = max_sentences  # keep the first N sentences of each split (tiny runs)
        self.num_trainable_words = 0  # word ids below this are train words; above, frozen pretrained words
        self.layer_cache: Any = None  # set to a LayerCache to read the frozen biLM's layers from disk
        self.elmo_context = "sentence"  # or "document": the biLM reads each document as one stream
        self.max_stream_positions = MAX_POSITIONS  # document mode: the chunk size of long documents
        self.datasets: Any = None  # datasets.DatasetDict: tokens, tags (original strings), doc
        self.splits: dict[str, Split] = {}
        self.source_scheme: str | None = None
        self.word_vocab: Vocab | None = None
        self.char_vocab: Vocab | None = None
        self.tag_vocab: Vocab | None = None

    def setup(self, stage: str | None = None) -> None:
        """Load, convert and index the data (once; later calls do nothing)."""
        if self.splits:
            return
        self.datasets = load_hub_splits(self.hub_name) if self.hub_name else load_local_splits(self.data_dir)
        raw = {name: ds.to_dict() for name, ds in self.datasets.items()}
        self.source_scheme = detect_scheme(raw["train"]["tags"])
        for name, col in raw.items():
            keep = [i for i, t in enumerate(col["tokens"]) if t]  # an empty row cannot be tagged
            keep = keep[: self.max_sentences] if self.max_sentences is not None else keep
            source_tags = [col["tags"][i] for i in keep]
            self.splits[name] = Split(
                tokens=[col["tokens"][i] for i in keep],
                tags=[convert(t, self.source_scheme, self.scheme) for t in source_tags],
                source_tags=source_tags,
                docs=[col["doc"][i] for i in keep],
            )
        train = self.splits["train"]
        self.word_vocab = build_word_vocab(train.tokens, self.lowercase, self.min_word_count)
        self.num_trainable_words = len(self.word_vocab)
        self.char_vocab = build_char_vocab(train.tokens)
        self.tag_vocab = build_tag_vocab(train.tags, self.scheme)
        for name in ("valid", "test"):
            unseen = {t for tags in self.splits[name].tags for t in tags if t not in self.tag_vocab}
            if unseen:
                raise NerAppError(
                    f"{name} has tags whose entity types never occur in train: {sorted(unseen)}"
                )

    def extend_word_vocab(self, words: Sequence[str]) -> int:
        """Append pretrained words (e.g. GloVe's) after the train words, so that a word unseen in train but
        known to the pretrained vectors is not UNK. Ids from ``num_trainable_words`` on are these words.
        Returns how many were added."""
        base = self.word_vocab.itos[2:]
        known = set(base)
        extra = [w for w in dict.fromkeys(words) if w not in known]
        counts = self.word_vocab.counts
        self.word_vocab = Vocab(base + extra, specials=True, lowercase=self.lowercase)
        self.word_vocab.counts = counts
        return len(extra)

    def dataloader(self, split: str, shuffle: bool = False, batch_size: int | None = None) -> DataLoader:
        """Batches of a split ("train", "valid" or "test"); train uses ``batch_size``, the others
        ``eval_batch_size`` unless ``batch_size`` is given."""
        if split not in _SPLIT_ALIASES:
            raise KeyError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
        if not self.splits:
            raise RuntimeError("call setup() before asking for a dataloader")
        name = _SPLIT_ALIASES[split]
        data = self.splits[name]
        size = batch_size or (self.batch_size if name == "train" else self.eval_batch_size)
        sampler = LengthBucketSampler([len(t) for t in data.tokens], size, shuffle=shuffle, seed=self.seed)
        contexts = keys = None
        if self.elmo_context == "document":
            contexts, keys = [], []
            for doc in self.documents(name):
                sentences = [data.tokens[i] for i in doc]
                contexts += document_contexts(sentences, self.max_stream_positions)
                if self.layer_cache is not None:
                    keys += document_keys(sentences, self.max_stream_positions)
        return DataLoader(
            _SplitDataset(data),
            batch_sampler=sampler,
            collate_fn=Collator(
                self.word_vocab,
                self.char_vocab,
                self.tag_vocab,
                self.max_word_chars,
                self.layer_cache,
                contexts if self.layer_cache is None else None,
                keys if self.layer_cache is not None else None,
            ),  # fmt: skip
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def documents(self, split: str) -> list[range]:
        """The documents of a split as ranges of sentence indices: runs of consecutive sentences with one
        ``doc`` id (CoNLL ``-DOCSTART-`` blocks; a file without any is one document)."""
        docs = self.splits[_SPLIT_ALIASES[split]].docs
        starts = [i for i in range(len(docs)) if i == 0 or docs[i] != docs[i - 1]]
        return [range(a, b) for a, b in zip(starts, [*starts[1:], len(docs)], strict=True)]

    def train_dataloader(self) -> DataLoader:
        return self.dataloader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.dataloader("valid")

    def test_dataloader(self) -> DataLoader:
        return self.dataloader("test")

    def decode_tags(
        self, tag_ids: torch.Tensor | Sequence[Sequence[int]], mask: torch.Tensor
    ) -> list[list[str]]:
        """Tag strings (training scheme) of ids (B, T) or of per-sentence id lists, cut to the mask (B, T)."""
        lengths = mask.sum(dim=1).tolist()
        rows = tag_ids.tolist() if isinstance(tag_ids, torch.Tensor) else tag_ids
        return [self.tag_vocab.decode(row[:n]) for row, n in zip(rows, lengths, strict=True)]

    def to_source_scheme(self, tags: Sequence[Sequence[str]]) -> list[list[str]]:
        """Tag sequences of the training scheme in the scheme of the data files (IOB1 for CoNLL-2003)."""
        return [convert(t, self.scheme, self.source_scheme) for t in tags]
