"""Tagging new text with an exported tagger: batched by length under a token budget, a plain inference loop.

Nothing of training is imported here (no Lightning): the decode math is the model's (``decode_scored``), the
batching rule is ``text/batching.py``'s, the same ones that training's evaluation uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from ner_app.predict.tag_conll import is_token_lines, predict_conll, tag_conll
from ner_app.tagger.batch import Batch
from ner_app.tagger.crf.readings import read_sentences
from ner_app.tagger.export import load_export
from ner_app.tagger.inference import inference_batches
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.batching import PREDICT_BATCH_SIZE, PREDICT_MAX_TOKENS, check_budget
from ner_app.text.pieces import join_pieces, join_readings, predict_lines, split_pieces, tag_lines
from ner_app.text.predictions import TaggedLine
from ner_app.text.readings import ReadingOptions, SentenceReading
from ner_app.text.tags import convert

__all__ = ["PREDICT_MAX_TOKENS", "Predictor", "is_token_lines", "predict_conll", "tag_conll"]


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

    @property
    def calibrated(self) -> bool:
        """Whether the export holds a calibration (its scores are temperature-scaled)."""
        return self.spec.calibration is not None

    @property
    def document_context(self) -> bool:
        """Whether a feature's encoder reads whole documents (sentences are then batched in stream order)."""
        return any(f.document_positions is not None for f in self.spec.features)

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
