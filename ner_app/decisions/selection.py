"""``ner-app select``: the sentences of a pool to annotate next, most uncertain first (active learning).

A pool is raw text (each non-blank line is one candidate, tokenised and cut into sentences as ``predict`` does)
or a CoNLL file (each sentence is one candidate, its tokens the first column). The model scores every candidate
once (``tagger/crf/uncertainty.py``; a line of several sentences, or a sentence tagged in pieces, is their product)
and the ``k`` with the highest uncertainty are chosen, or as many as a budget of tokens holds. Ties, and every
candidate under ``random``, are ordered by a permutation drawn from the seed, then by input order: the same pool,
model and seed always give the same selection.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Literal

import torch

from ner_app.decisions.emissions import crf_of, emission_tensors
from ner_app.errors import NerAppError
from ner_app.predict.loading import AnyPredictor
from ner_app.tagger.crf.uncertainty import STRATEGIES, SentenceUncertainty, combine, sentence_uncertainty
from ner_app.text.conll import DOCSTART, MAX_CONLL_BYTES, conll_blocks
from ner_app.text.lines import read_lines
from ner_app.text.pieces import MAX_TOKENS, split_pieces
from ner_app.text.tags import is_tag_or_unknown
from ner_app.text.tokenizer import sentences as split_sentences

PoolFormat = Literal["text", "conll"]
POOL_FORMATS = ("auto", "text", "conll")


@dataclass(frozen=True)
class Candidate:
    """One unit of a pool: ``index`` among the candidates, the 1-based ``line`` it starts on, its ``text`` (the
    raw line, or a CoNLL sentence's tokens joined by spaces), its sentences' tokens, its CoNLL ``rows`` (the
    token lines as they were; empty for text) and its document id (document context)."""

    index: int
    line: int
    text: str
    sentences: tuple[tuple[str, ...], ...]
    rows: tuple[str, ...]
    doc: int


@dataclass(frozen=True)
class Selected:
    """A chosen candidate, its ``rank`` (0: the most uncertain) and the strategy's number for it."""

    candidate: Candidate
    rank: int
    value: float


def _looks_conll(lines: Sequence[str]) -> bool:
    """A CoNLL file: it starts with -DOCSTART-, or every non-blank line has a token and a tag column (or - for one not annotated)."""
    filled = [line.split() for line in lines if line.strip()]
    if not filled:
        return False
    if filled[0][0] == DOCSTART:
        return True
    return all(len(cols) >= 2 and is_tag_or_unknown(cols[-1]) for cols in filled)


def read_pool(path: str | Path, pool_format: str = "auto") -> tuple[list[Candidate], PoolFormat]:
    """The candidates of a pool file and its format (``auto``: CoNLL when ``_looks_conll``, else text)."""
    source = Path(path)
    if source.is_dir():
        raise NerAppError(f"--input {path}: is a folder, expected a text or CoNLL file")
    if not source.is_file():  # a FIFO may never end, and the pool is read whole
        what = "not found" if not os.path.lexists(source) else "not a regular file (a FIFO or a device)"
        raise NerAppError(f"--input {path}: {what}; expected a text or CoNLL file")
    if source.stat().st_size > MAX_CONLL_BYTES:
        raise NerAppError(f"--input {path}: larger than {MAX_CONLL_BYTES >> 30} GiB; split the pool")
    lines = read_lines(source, "the pool")
    if pool_format not in POOL_FORMATS:
        raise NerAppError(f"--pool-format {pool_format!r}: expected one of {', '.join(POOL_FORMATS)}")
    conll = _looks_conll(lines) if pool_format == "auto" else pool_format == "conll"
    kind: PoolFormat = "conll" if conll else "text"
    candidates = _conll_candidates(lines) if kind == "conll" else _text_candidates(lines)
    if not candidates:
        raise NerAppError(f"--input {path}: no sentences in the pool (expected {_expected(kind)})")
    return candidates, kind


def _expected(kind: str) -> str:
    return "'token ...' lines, a blank line after each sentence" if kind == "conll" else "lines of text"


def _text_candidates(lines: Sequence[str]) -> list[Candidate]:
    found: list[Candidate] = []
    for number, line in enumerate(lines, start=1):
        sentences = tuple(tuple(t.text for t in s) for s in split_sentences(line, max_tokens=MAX_TOKENS))
        if any(sentences):
            found.append(Candidate(len(found), number, line, sentences, (), len(found)))
    return found


def _conll_candidates(lines: Sequence[str]) -> list[Candidate]:
    found: list[Candidate] = []
    number, doc = 1, 0
    for block in conll_blocks(lines):
        if block[0].startswith(DOCSTART):
            doc += 1
        elif block[0].strip():
            tokens = tuple(row.split()[0] for row in block)
            found.append(Candidate(len(found), number, " ".join(tokens), (tokens,), tuple(block), doc))
        number += len(block)
    return found


def pool_uncertainty(predictor: AnyPredictor, candidates: Sequence[Candidate]) -> list[SentenceUncertainty]:
    """Each candidate's uncertainty: one forward pass over the pool in the predictor's batches."""
    sentences = [list(s) for c in candidates for s in c.sentences]
    owners = [i for i, c in enumerate(candidates) for _ in c.sentences]
    documents = [c.doc for c in candidates for _ in c.sentences]
    pieces = split_pieces(sentences)
    found: dict[int, SentenceUncertainty] = {}
    crf = crf_of(predictor)
    tokens, ids = [t for _, t in pieces], [documents[i] for i, _ in pieces]
    with torch.inference_mode():
        for group, emissions, mask in emission_tensors(predictor, tokens, ids):  # (B, T, K), (B, T)
            found.update(zip(group, sentence_uncertainty(crf, emissions, mask), strict=True))
    parts: list[list[SentenceUncertainty]] = [[] for _ in candidates]
    for p, (sentence, _) in enumerate(pieces):
        parts[owners[sentence]].append(found[p])
    return [combine(p) for p in parts]


def ranking(keys: Sequence[float], seed: int) -> list[int]:
    """Indices by decreasing key; ties in the order of a permutation drawn from ``seed``, then input order."""
    draw = list(range(len(keys)))
    random.Random(seed).shuffle(draw)
    return sorted(range(len(keys)), key=lambda i: (-keys[i], draw[i], i))


def tokens_of(candidate: Candidate) -> int:
    """The tokens an annotator reads in ``candidate``: those of its sentences (predict's tokenisation)."""
    return sum(len(s) for s in candidate.sentences)


def select(
    predictor: AnyPredictor | None,
    candidates: Sequence[Candidate],
    k: int | None,
    strategy: str,
    seed: int,
    tokens: int | None = None,
) -> list[Selected]:
    """The candidates to annotate next, in rank order: the first ``k`` of the ranking (all of it for None), cut
    before the first candidate that would take their tokens over ``tokens`` (no cut for None), so the selection
    is always a prefix of the ranking. ``random`` needs no model (``predictor`` may be None); every other
    strategy scores the whole pool."""
    if strategy not in STRATEGIES:
        raise NerAppError(f"--strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}")
    if k is not None and k < 1:
        raise NerAppError(f"--k {k}: expected the number of sentences to select, an integer >= 1")
    if tokens is not None and tokens < 1:
        raise NerAppError(f"--tokens {tokens}: expected a budget of tokens to select, an integer >= 1")
    if strategy == "random":
        scores = [SentenceUncertainty(0.0, 0.0, 0.0, 0) for _ in candidates]
    else:
        if predictor is None:
            raise ValueError(f"strategy {strategy} needs a model")
        scores = pool_uncertainty(predictor, candidates)
    order = ranking([s.rank_key(strategy) for s in scores], seed)[:k]
    if tokens is not None:  # the running totals only grow: those within the budget are a prefix
        fits = sum(total <= tokens for total in accumulate(tokens_of(candidates[i]) for i in order))
        if order and not fits:
            first = candidates[order[0]]
            raise NerAppError(
                f"--tokens {tokens}: the first candidate of the ranking (line {first.line} of the pool) alone has "
                f"{tokens_of(first):,} tokens; nothing was selected (raise --tokens)"
            )
        order = order[:fits]
    return [Selected(candidates[i], rank, scores[i].value(strategy)) for rank, i in enumerate(order)]
