"""The tagger's word char CNN with each distinct character row of a batch computed once, against every position.

    python -m benchmarks.char_rows [--threads 1] [--repeats 5] [--batches 40] [--sizes 1,4,8,16,32,64] [--train F]

Batches are those of training: CoNLL-2003's training sentences (the tiny corpus without ../shared) through
``LengthBucketSampler`` (shuffled with a fixed seed, sorted by length within chunks, the baseline's token
budget) and ``encode_batch``. For each batch size, the char CNN of the baseline's size (``ModelConfig``'s
defaults: 16-d characters, 128 filters of width 3), forward and backward over the same ``--batches`` batches,
the two ways in turn (``common.interleaved``): every position (``WordCharCNN.words`` of every row) and the
distinct rows (``WordCharCNN.forward`` with ``DISTINCT_MIN_WORK`` at 0). It checks first that both give the
same features to the bit. Prints the positions and distinct rows per batch, the medians and their ratio.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.common import ROOT, SHARED, interleaved, machine, print_table
from ner_app.config.schema import ModelConfig
from ner_app.tagger import char_features
from ner_app.tagger.batch import MAX_WORD_CHARS
from ner_app.tagger.char_features import WordCharCNN
from ner_app.tagger.features.chars import char_ids
from ner_app.text.conll import read_conll
from ner_app.text.vocab import Vocab, build_char_vocab, build_word_vocab
from ner_app.train.sampler import LengthBucketSampler

BUDGET = 8192  # data.max_tokens_per_batch's default


class _VocabView:
    """What ``char_ids`` reads of a spec: the char vocabulary and the width cap."""

    def __init__(self, words: Vocab, chars: Vocab) -> None:
        self.word_vocab, self.char_vocab, self.max_word_chars = words, chars, MAX_WORD_CHARS


def training_batches(
    sentences: list[list[str]], words: Vocab, chars: Vocab, size: int, count: int
) -> list[torch.Tensor]:
    """The (B, T, W) char ids of the first ``count`` training batches of ``size`` sentences."""
    sampler = LengthBucketSampler([len(s) for s in sentences], size, shuffle=True, seed=1, max_tokens=BUDGET)
    batches = []
    for indices in sampler:
        chosen = [sentences[i] for i in indices]
        batches.append(char_ids(chosen, _VocabView(words, chars)))
        if len(batches) == count:
            break
    return batches


def fwd_bwd(
    features: Callable[[torch.Tensor], torch.Tensor], batches: list[torch.Tensor]
) -> Callable[[], None]:
    def run() -> None:
        for chars in batches:
            features(chars).sum().backward()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--sizes", default="1,4,8,16,32,64", help="sentences per batch, comma-separated")
    parser.add_argument("--train", type=Path, help="a CoNLL file (default: CoNLL-2003's training file)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train = args.train or SHARED / "data" / "conll2003" / "train.txt"
    if not train.is_file():
        train = ROOT / "tests" / "data" / "tiny_conll" / "train.txt"
    sentences = [s.tokens for s in read_conll(train)]
    m = ModelConfig()
    torch.manual_seed(0)
    words, char_vocab = build_word_vocab(sentences), build_char_vocab(sentences)
    cnn = WordCharCNN(len(char_vocab.itos), m.char_dim, m.char_filters, m.char_width)
    char_features.DISTINCT_MIN_WORK = 0  # forward: always the distinct rows

    def every_position(chars: torch.Tensor) -> torch.Tensor:
        return cnn.words(chars.reshape(-1, chars.shape[-1]))

    print(
        f"{train}, {len(sentences):,} sentences; {machine()}; {args.threads} thread(s), forward + backward, "
    )
    print(f"{args.batches} batches a size, median of {args.repeats} rounds in turn\n")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        batches = training_batches(sentences, words, char_vocab, size, args.batches)
        for chars in batches:  # the same features, bit for bit
            assert torch.equal(cnn(chars).reshape(-1, m.char_filters), every_position(chars))
        positions = sum(c.shape[0] * c.shape[1] for c in batches) / len(batches)
        distinct = sum(len(torch.unique(c.reshape(-1, c.shape[-1]), dim=0)) for c in batches) / len(batches)
        fns = {"every position": fwd_bwd(every_position, batches), "distinct rows": fwd_bwd(cnn, batches)}
        times = {name: t.median for name, t in interleaved(fns, args.repeats).items()}
        every, once = times["every position"], times["distinct rows"]
        rows.append(
            (
                size,
                f"{positions:,.0f}",
                f"{distinct:,.0f}",
                f"{every / len(batches) * 1e3:.2f}",
                f"{once / len(batches) * 1e3:.2f}",
                f"{every / once:.2f}x",
            )
        )
    print_table(
        [
            "sentences a batch",
            "positions",
            "distinct rows",
            "every position, ms",
            "distinct rows, ms",
            "speed-up",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
