"""Tagging new text with an exported tagger: batched by length under a token budget, a plain inference loop.

Nothing of training is imported here (no Lightning): the decode math is the model's (``decode_scored``), the
batching rule is ``text/batching.py``'s, the same ones that training's evaluation uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from ner_app.tagger.batch import Batch
from ner_app.tagger.crf.readings import read_sentences
from ner_app.tagger.export import load_export
from ner_app.tagger.inference import inference_batches
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.batching import PREDICT_BATCH_SIZE, PREDICT_MAX_TOKENS, check_budget
from ner_app.text.conll import DOCSTART, conll_blocks
from ner_app.text.pieces import MAX_TOKENS, join_pieces, join_readings, predict_lines, split_pieces, tag_lines
from ner_app.text.predictions import ConllItem, TaggedLine, TaggedSentence
from ner_app.text.readings import ReadingOptions, SentenceReading
from ner_app.text.tags import convert
from ner_app.text.tokenizer import sentences as split_sentences

__all__ = ["PREDICT_MAX_TOKENS", "Predictor", "predict_conll", "tag_conll"]


class Predictor:
    """Tags tokenised sentences; returns tags in the training data's original scheme and per-token scores.

    A batch holds at most ``batch_size`` pieces and ``max_tokens`` padded tokens (``budget_batches``)."""

    def __init__(
        self,
        tagger: BiLstmCrfTagger,
        spec: TaggerSpec,
        batch_size: int = PREDICT_BATCH_SIZE,
        max_tokens: int | None = PREDICT_MAX_TOKENS,
    ) -> None:
        check_budget(batch_size, max_tokens)
        self.tagger, self.spec, self.batch_size, self.max_tokens = tagger.eval(), spec, batch_size, max_tokens
        self.words, self.chars, self.tags = spec.word_vocab, spec.char_vocab, spec.tag_vocab
        self.scheme, self.source_scheme = spec.scheme, spec.source_scheme
        self.device = next(tagger.parameters()).device

    @classmethod
    def from_export(
        cls,
        export_dir: str | Path,
        device: str = "cpu",
        batch_size: int = PREDICT_BATCH_SIZE,
        max_tokens: int | None = PREDICT_MAX_TOKENS,
    ) -> Predictor:
        tagger, spec = load_export(export_dir, device)
        return cls(tagger, spec, batch_size, max_tokens)

    def tag(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[int] | None = None
    ) -> list[tuple[list[str], list[float]]]:
        """(tags in the training scheme, probability of each predicted tag) for every sentence, in input order.

        Empty sentences get empty lists; sentences longer than ``MAX_TOKENS`` are tagged in pieces. A tagger
        trained with document context reads ``documents`` (a document id per sentence; consecutive sentences
        with one id form a document; default: one document of all) with its pieces as the stream's sentences.
        """
        pieces = split_pieces(sentences)  # (sentence index, tokens of one piece)
        results: dict[int, tuple[list[str], list[float]]] = {}
        with torch.inference_mode():
            for group, batch in self.piece_batches(pieces, documents):
                paths, chosen = self.tagger.decode_scored(batch)  # (B, T) each
                paths_rows, chosen_rows = paths.tolist(), chosen.tolist()
                for row, p in enumerate(group):
                    n = len(pieces[p][1])
                    results[p] = (self.tags.decode(paths_rows[row][:n]), chosen_rows[row][:n])
        return join_pieces(pieces, results, len(sentences))

    def piece_batches(
        self, pieces: Sequence[tuple[int, list[str]]], documents: Sequence[int] | None = None
    ) -> Iterator[tuple[list[int], Batch]]:
        """The batches ``tag`` runs (and callers that need more of the model than tags: ``select``'s
        uncertainty): (indices into ``pieces``, their batch on the tagger's device). ``pieces`` are
        ``split_pieces(sentences)``; ``documents`` as ``tag``'s, one id per sentence. By length; in document
        context in stream order (``tagger/inference.py``, the one inference loop). Nothing is kept between calls."""
        ids = [documents[i] for i, _ in pieces] if documents is not None else None
        sentences = [tokens for _, tokens in pieces]
        yield from inference_batches(self.tagger, self.spec, sentences, ids, self.batch_size, self.max_tokens)

    def emission_batches(
        self, pieces: Sequence[Sequence[str]], documents: Sequence[int] | None = None
    ) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor]]:
        """(piece indices, emissions (B, T, K), mask (B, T)) of every batch of ``pieces`` (non-empty sentences
        of at most ``MAX_TOKENS``; ``documents``: a document id per piece), batched as ``tag`` batches them: what
        calibration fits on."""
        items = [(i, list(tokens)) for i, tokens in enumerate(pieces)]
        with torch.inference_mode():
            for group, batch in self.piece_batches(items, documents):
                yield group, self.tagger.emissions(batch), batch["mask"]

    def read(
        self,
        sentences: Sequence[Sequence[str]],
        documents: Sequence[int] | None = None,
        options: ReadingOptions | None = None,
    ) -> list[SentenceReading]:
        """Each sentence's tags, its entities with the probability of each one's reading, and what
        ``options`` asks for (alternatives, flagged tokens), token offsets; batched as ``tag`` batches."""
        options = options or ReadingOptions()
        pieces = split_pieces(sentences)
        results: dict[int, SentenceReading] = {}
        with torch.inference_mode():
            for group, batch in self.piece_batches(pieces, documents):
                emissions = self.tagger.emissions(batch)  # (B, T, K)
                found = read_sentences(
                    self.tagger.crf, emissions, batch["mask"], self.tags.itos, self.scheme, options
                )
                results.update(zip(group, found, strict=True))
        return join_readings(pieces, results, len(sentences))

    def to_source(self, tags: Sequence[str]) -> list[str]:
        """Tags of the training scheme in the scheme of the training files (IOB1 for CoNLL-2003)."""
        return convert(tags, self.scheme, self.source_scheme)

    def tag_lines(
        self, lines: Iterable[str], chunk: int = 512, options: ReadingOptions | None = None
    ) -> Iterator[TaggedLine]:
        """One ``TaggedLine`` (its entities, offsets into the line) per line of raw text. Lines are processed
        ``chunk`` at a time so that batches mix sentences across lines."""
        return tag_lines(lines, self.read, options, chunk)

    def predict_texts(
        self, lines: Iterable[str], chunk: int = 512, options: ReadingOptions | None = None
    ) -> Iterator[dict[str, Any]]:
        """``tag_lines`` as JSON objects: ``{"text", "entities": [{"start", "end", "type", "text", "score"}]}``
        per line (what ``--format jsonl`` prints and the server answers)."""
        return predict_lines(lines, self.read, options, chunk)


def tag_conll(predictor: Predictor, lines: Iterable[str], tokens: bool | None = None) -> Iterator[ConllItem]:
    """A ``TaggedSentence`` (the predicted tags, original scheme) per sentence of CoNLL token lines; other lines
    pass through as they are.

    ``-DOCSTART-`` lines separate documents; a file without any is one document (document context reads it
    in chunks of ``max_stream_positions``). Input that is raw text rather than token lines (``is_token_lines``)
    is tokenised first, with the tokenizer of the other formats: each line's sentences become ``token tag``
    lines, a blank line after each input line, and a line is one document. ``tokens`` says which the lines
    are when the caller knows (None: detected)."""
    blocks = list(conll_blocks(lines))
    if not (is_token_lines(blocks) if tokens is None else tokens):
        yield from _tag_text_as_conll(predictor, _lines(blocks))
        return
    is_sentence = [bool(b[0].strip()) and not b[0].startswith(DOCSTART) for b in blocks]
    sentences = [[line.split()[0] for line in b] for b, s in zip(blocks, is_sentence, strict=True) if s]
    documents, doc = [], 0
    for block, sentence in zip(blocks, is_sentence, strict=True):
        if sentence:
            documents.append(doc)
        elif block[0].startswith(DOCSTART):
            doc += 1
    tagged = iter(predictor.tag(sentences, documents))
    for block, sentence in zip(blocks, is_sentence, strict=True):
        if not sentence:
            yield block[0]
            continue
        yield TaggedSentence(tuple(block), tuple(predictor.to_source(next(tagged)[0])))


def is_token_lines(blocks: Sequence[Sequence[str]]) -> bool:
    """Whether ``conll_blocks`` of an input are CoNLL token lines rather than raw text: a ``-DOCSTART-`` line,
    or every non-blank line with the same number of columns and some sentence of two or more lines. So one line
    of text (``echo "Angela Merkel met ..." | predict --format conll``) is text, and so are lines whose word
    counts differ; a file of one-token sentences is tokens (the tokenizer would give the same)."""
    if any(b[0].startswith(DOCSTART) for b in blocks):
        return True
    text = [b for b in blocks if b[0].strip()]
    columns = {len(line.split()) for b in text for line in b}
    return len(columns) == 1 and any(len(b) > 1 for b in text)


def _lines(blocks: Sequence[Sequence[str]]) -> list[str]:
    return [line for b in blocks for line in b]


def _tag_text_as_conll(predictor: Predictor, lines: Sequence[str]) -> Iterator[ConllItem]:
    """Raw text lines as CoNLL: every sentence of a line (``tag_lines``'s tokenizer) as ``token tag`` lines."""
    per_line = [split_sentences(line, max_tokens=MAX_TOKENS) for line in lines]
    flat = [[t.text for t in sentence] for sentences in per_line for sentence in sentences]
    tagged = iter(predictor.tag(flat, [n for n, sentences in enumerate(per_line) for _ in sentences]))
    for sentences in per_line:
        for sentence in sentences:
            tags = predictor.to_source(next(tagged)[0])
            yield TaggedSentence(tuple(t.text for t in sentence), tuple(tags))
        yield ""


def predict_conll(predictor: Predictor, lines: Iterable[str]) -> Iterator[str]:
    """``tag_conll`` as lines: the predicted tag appended to every token line; other lines pass through."""
    for item in tag_conll(predictor, lines):
        yield from (item,) if isinstance(item, str) else item.conll_lines()
