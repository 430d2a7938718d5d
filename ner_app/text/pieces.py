"""Tagging raw lines, the model-free part: sentences cut into pieces, tags joined back, entities with offsets.

Shared by the torch predictor (``predict/predictor.py``) and the onnxruntime one (``onnx/predictor.py``),
so that both give the same ``TaggedLine`` records (``text/predictions.py``); no torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ner_app.text.predictions import Entity, Flagged, TaggedLine
from ner_app.text.readings import Missed, ReadingOptions, Scored, SentenceReading
from ner_app.text.tokenizer import Token
from ner_app.text.tokenizer import sentences as split_sentences

MAX_TOKENS = 250  # longer sentences are tagged in consecutive pieces of at most this many tokens

Tagged = tuple[list[str], list[float]]  # tags in the training scheme, probability of each
# sentences (tokens) and each one's document id -> one Tagged per sentence
TagFunction = Callable[[list[list[str]], list[int]], list[Tagged]]
# sentences (tokens), each one's document id and what to report -> one SentenceReading per sentence
ReadFunction = Callable[[list[list[str]], list[int], ReadingOptions], list[SentenceReading]]


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


def join_readings(
    pieces: Sequence[tuple[int, list[str]]], results: dict[int, SentenceReading], count: int
) -> list[SentenceReading]:
    """Each sentence's reading from those of its pieces (``results`` by piece index): tags joined, token
    offsets moved by the piece's start. No entity crosses two pieces: the CRF closes every entity at a
    piece's end and opens none at its start."""
    parts: list[list[SentenceReading]] = [[] for _ in range(count)]
    for p, (i, _) in enumerate(pieces):  # pieces of a sentence are consecutive and in order
        parts[i].append(results[p])
    return [_joined(found) for found in parts]


def _joined(parts: Sequence[SentenceReading]) -> SentenceReading:
    if len(parts) == 1:
        return parts[0]
    tags: list[str] = []
    found: list[Scored] = []
    alternatives: list[list[Scored]] | None = None if parts and parts[0].alternatives is None else []
    missed: list[Missed] | None = None if parts and parts[0].missed is None else []
    for part in parts:
        at = len(tags)
        tags += part.tags
        found += [_moved(r, at) for r in part.entities]
        if alternatives is not None and part.alternatives is not None:
            alternatives += [[_moved(r, at) for r in alts] for alts in part.alternatives]
        if missed is not None and part.missed is not None:
            missed += [Missed(m.token + at, m.outside, _moved(m.reading, at)) for m in part.missed]
    return SentenceReading(tags, found, alternatives, missed)


def _moved(scored: Scored, at: int) -> Scored:
    (start, end, kind), p = scored
    return (start + at, end + at, kind), p


def tag_lines(
    lines: Iterable[str], read: ReadFunction, options: ReadingOptions | None = None, chunk: int = 512
) -> Iterator[TaggedLine]:
    """One ``TaggedLine`` per line; offsets index into the line and an entity's ``score`` is the probability
    of its reading (``text/readings.py``); ``options`` asks for more. Lines are tagged ``chunk`` at a time so
    that batches mix sentences across lines; a line is one document."""
    options = options or ReadingOptions()
    buffer: list[str] = []
    for line in lines:
        buffer.append(line)
        if len(buffer) == chunk:
            yield from _tag_chunk(buffer, read, options)
            buffer = []
    if buffer:
        yield from _tag_chunk(buffer, read, options)


def predict_lines(
    lines: Iterable[str], read: ReadFunction, options: ReadingOptions | None = None, chunk: int = 512
) -> Iterator[dict[str, Any]]:
    """``tag_lines`` as predict's JSON objects: ``{"text", "entities": [{"start", "end", "type", "text",
    "score"}]}`` per line (``TaggedLine.to_json``)."""
    return (tagged.to_json() for tagged in tag_lines(lines, read, options, chunk))


def _tag_chunk(lines: Sequence[str], read: ReadFunction, options: ReadingOptions) -> Iterator[TaggedLine]:
    per_line = [split_sentences(line, max_tokens=MAX_TOKENS) for line in lines]
    flat = [[t.text for t in sentence] for sentences in per_line for sentence in sentences]
    documents = [n for n, sentences in enumerate(per_line) for _ in sentences]
    results = iter(read(flat, documents, options))
    for line, sentences in zip(lines, per_line, strict=True):
        found: list[Entity] = []
        flagged: list[Flagged] | None = None if options.flag_missed is None else []
        for sentence in sentences:
            result = next(results)
            for n, scored in enumerate(result.entities):
                if round(scored[1], 4) < options.min_score:
                    continue
                others = result.alternatives[n] if result.alternatives is not None else None
                alternatives = None if others is None else tuple(_entity(line, sentence, a) for a in others)
                found.append(_entity(line, sentence, scored, alternatives))
            if flagged is not None:
                for m in result.missed or []:
                    token = sentence[m.token]
                    reading = _entity(line, sentence, m.reading)
                    flagged.append(Flagged(token.start, token.end, token.text, round(m.outside, 4), reading))
        yield TaggedLine(line, tuple(found), None if flagged is None else tuple(flagged))


def _entity(
    line: str, sentence: Sequence[Token], scored: Scored, alternatives: tuple[Entity, ...] | None = None
) -> Entity:
    """The ``Entity`` of a scored reading of a sentence of ``line``: character offsets, rounded probability."""
    (start, end, kind), p = scored
    s, e = sentence[start].start, sentence[end - 1].end
    return Entity(s, e, kind, line[s:e], round(p, 4), alternatives)
