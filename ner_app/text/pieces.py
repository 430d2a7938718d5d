"""Tagging raw lines, the model-free part: sentences cut into pieces, tags joined back, entities with offsets.

Shared by the torch predictor (``serve/predictor.py``) and the onnxruntime one (``serve/onnx_predictor.py``),
so that both give the same ``TaggedLine`` records (``text/records.py``); no torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ner_app.text.records import Entity, TaggedLine
from ner_app.text.tags import entities
from ner_app.text.tokenizer import sentences as split_sentences

MAX_TOKENS = 250  # longer sentences are tagged in consecutive pieces of at most this many tokens

Tagged = tuple[list[str], list[float]]  # tags in the training scheme, probability of each
# sentences (tokens) and each one's document id -> one Tagged per sentence
TagFunction = Callable[[list[list[str]], list[int]], list[Tagged]]


def split_pieces(sentences: Sequence[Sequence[str]]) -> list[tuple[int, list[str]]]:
    """(sentence index, tokens) of every piece of at most ``MAX_TOKENS``, in order; an empty sentence has none."""
    return [
        (i, list(sentence[s : s + MAX_TOKENS]))
        for i, sentence in enumerate(sentences)
        for s in range(0, len(sentence), MAX_TOKENS)
    ]


def join_pieces(
    pieces: Sequence[tuple[int, list[str]]], results: dict[int, Tagged], count: int
) -> list[Tagged]:
    """Each sentence's tags and probabilities from those of its pieces (``results`` by piece index)."""
    out: list[Tagged] = [([], []) for _ in range(count)]
    for p, (i, _) in enumerate(pieces):  # pieces of a sentence are consecutive and in order
        out[i][0].extend(results[p][0])
        out[i][1].extend(results[p][1])
    return out


def tag_lines(lines: Iterable[str], tag: TagFunction, scheme: str, chunk: int = 512) -> Iterator[TaggedLine]:
    """One ``TaggedLine`` per line; offsets index into the line and an entity's ``score`` is the mean
    probability of its tags. Lines are tagged ``chunk`` at a time so that batches mix sentences across lines;
    a line is one document."""
    buffer: list[str] = []
    for line in lines:
        buffer.append(line)
        if len(buffer) == chunk:
            yield from _tag_chunk(buffer, tag, scheme)
            buffer = []
    if buffer:
        yield from _tag_chunk(buffer, tag, scheme)


def predict_lines(
    lines: Iterable[str], tag: TagFunction, scheme: str, chunk: int = 512
) -> Iterator[dict[str, Any]]:
    """``tag_lines`` as predict's JSON objects: ``{"text", "entities": [{"start", "end", "type", "text",
    "score"}]}`` per line (``TaggedLine.to_json``)."""
    return (tagged.to_json() for tagged in tag_lines(lines, tag, scheme, chunk))


def _tag_chunk(lines: Sequence[str], tag: TagFunction, scheme: str) -> Iterator[TaggedLine]:
    per_line = [split_sentences(line, max_tokens=MAX_TOKENS) for line in lines]
    flat = [[t.text for t in sentence] for sentences in per_line for sentence in sentences]
    documents = [n for n, sentences in enumerate(per_line) for _ in sentences]
    tagged = iter(tag(flat, documents))
    for line, sentences in zip(lines, per_line, strict=True):
        found = []
        for sentence in sentences:
            tags, scores = next(tagged)
            for kind, start, end in entities(tags, scheme):
                s, e = sentence[start].start, sentence[end - 1].end
                score = sum(scores[start:end]) / (end - start)
                found.append(Entity(s, e, kind, line[s:e], round(score, 4)))
        yield TaggedLine(line, tuple(found))
