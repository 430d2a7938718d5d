"""``ner-app benchmark speed``: words per second of a tagger, with a 95% bootstrap confidence interval over
batches, the warm-up batches left out (as ``spacy benchmark speed`` reports it).

The input's lines are tokenised and cut into sentences before any timing (``text/tokenizer.py``, as predict
does), then tagged ``batch_size`` sentences at a time by the tagger's own ``tag`` (batched inside by length, as
predict batches): ``warmup`` batches first, untimed, then ``batches`` timed ones, the sentences cycled when the
input is shorter. Each timed batch gives words / seconds; the mean of those is the figure, and the 2.5th and
97.5th percentiles of the means of ``resamples`` resamples of the batches (with replacement) its interval.
Works with ``Predictor`` (torch) and ``OnnxPredictor`` (fp32 or int8 graphs) alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import cycle, islice

import numpy as np

from ner_app.errors import NerAppError
from ner_app.limits import MAX_BENCHMARK_BATCH_WORDS
from ner_app.text.batching import PREDICT_BATCH_SIZE
from ner_app.text.tokenizer import sentences as split_sentences

TagFunction = Callable[[list[list[str]]], object]


@dataclass(frozen=True)
class Speed:
    """Words per second: the mean over timed batches and its 95% bootstrap interval; what was timed."""

    mean: float
    low: float | None  # None with one timed batch: one rate has no spread to draw an interval from
    high: float | None
    batches: int
    warmup: int
    words: int
    seconds: float

    def line(self) -> str:
        interval = (
            f"95% CI [{self.low:,.0f}, {self.high:,.0f}]"
            if self.low is not None and self.high is not None
            else "no confidence interval (one batch; --batches 2 or more gives one)"
        )
        return (
            f"{self.mean:,.0f} words/s, {interval} over {self.batches} batches "
            f"({self.words:,} words in {self.seconds:.2f} s; {self.warmup} warm-up batches left out)"
        )


def token_sentences(lines: Sequence[str]) -> list[list[str]]:
    """The sentences of raw text lines, as tokens (predict's tokenisation); empty lines give none."""
    return [[t.text for t in sentence] for line in lines for sentence in split_sentences(line)]


def batch_stream(sentences: Sequence[list[str]], batch_size: int) -> Iterator[list[list[str]]]:
    """Batches of ``batch_size`` sentences, the sentences cycled for ever."""
    if not sentences:
        raise NerAppError("benchmark speed: the input has no words (expected lines of text)")
    looped = cycle(sentences)
    while True:
        yield list(islice(looped, batch_size))


def timed_batches(
    tag: TagFunction, batches: Iterator[list[list[str]]], count: int, warmup: int
) -> list[tuple[int, float]]:
    """(words, seconds) of ``count`` batches, after ``warmup`` batches that are run and not timed."""
    for _ in range(warmup):
        tag(next(batches))
    found = []
    for _ in range(count):
        batch = next(batches)
        start = time.perf_counter()
        tag(batch)
        found.append((sum(len(s) for s in batch), time.perf_counter() - start))
    return found


def bootstrap_speed(
    timed: Sequence[tuple[int, float]], warmup: int, resamples: int = 1000, seed: int = 0
) -> Speed:
    """Mean words/s over batches and the 95% percentile interval of the bootstrap means."""
    if not timed:
        raise NerAppError("benchmark speed: no timed batches (--batches must be at least 1)")
    words = np.array([w for w, _ in timed], dtype=np.float64)
    seconds = np.array([max(s, 1e-9) for _, s in timed], dtype=np.float64)
    rates = words / seconds  # (N,)
    picks = np.random.default_rng(seed).integers(0, len(rates), size=(resamples, len(rates)))  # (R, N)
    means = rates[picks].mean(axis=1)  # (R,)
    low, high = np.percentile(means, [2.5, 97.5])
    spread = len(rates) > 1  # every resample of one batch is that batch: a zero-width interval says nothing
    return Speed(
        float(rates.mean()),
        float(low) if spread else None,
        float(high) if spread else None,
        len(timed),
        warmup,
        int(words.sum()),
        float(seconds.sum()),
    )


def measure_speed(
    tag: TagFunction,
    lines: Sequence[str],
    batch_size: int = PREDICT_BATCH_SIZE,
    batches: int = 50,
    warmup: int = 3,
) -> Speed:
    """Words/s of ``tag`` (a tagger's ``tag``) on the sentences of ``lines``: see the module's docstring. A
    batch that would hold more than ``MAX_BENCHMARK_BATCH_WORDS`` words of this input is refused first."""
    sentences = token_sentences(lines)
    total = sum(len(s) for s in sentences)
    if sentences:  # a batch holds the input (cycled) at most this many times over
        most = -(-batch_size // len(sentences)) * total
        if most > MAX_BENCHMARK_BATCH_WORDS:
            raise NerAppError(
                f"--batch-size {batch_size:,}: a batch of this input ({len(sentences):,} sentences, {total:,} words, "
                f"cycled) holds up to {most:,} words, more than the {MAX_BENCHMARK_BATCH_WORDS:,} a timed batch "
                "may hold; lower --batch-size"
            )
    stream = batch_stream(sentences, batch_size)
    return bootstrap_speed(timed_batches(tag, stream, batches, warmup), warmup)
