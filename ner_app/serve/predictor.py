"""Tagging new text with an exported tagger: batched by length, through the same code path as training."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from torch.utils.data import DataLoader

from ner_app.bilm.batching import check_budget
from ner_app.bilm.document import Context, document_contexts
from ner_app.runtime.log_progress import silence_known_warnings
from ner_app.tagger.batch import Batch, encode_batch
from ner_app.tagger.export import load_export
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.conll import DOCSTART, conll_blocks
from ner_app.text.pieces import join_pieces, predict_lines, split_pieces
from ner_app.text.tags import convert
from ner_app.train.datamodule import LengthBucketSampler
from ner_app.train.module import TaggerModule

# padded tokens a batch holds at most (pieces x longest): 64 pieces of 250 tokens fit, so the default batch
# size is never split; it bounds memory when --batch-size is raised (--max-tokens)
PREDICT_MAX_TOKENS = 16384


class Predictor:
    """Tags tokenised sentences; returns tags in the training data's original scheme and per-token scores.

    A batch holds at most ``batch_size`` pieces and ``max_tokens`` padded tokens (``LengthBucketSampler``)."""

    def __init__(
        self,
        tagger: BiLstmCrfTagger,
        spec: TaggerSpec,
        batch_size: int = 64,
        max_tokens: int | None = PREDICT_MAX_TOKENS,
    ) -> None:
        check_budget(batch_size, max_tokens)
        self.tagger, self.spec, self.batch_size, self.max_tokens = tagger.eval(), spec, batch_size, max_tokens
        self.words, self.chars, self.tags = spec.word_vocab, spec.char_vocab, spec.tag_vocab
        self.scheme, self.source_scheme = spec.scheme, spec.source_scheme
        self.device = next(tagger.parameters()).device
        self._module = TaggerModule(tagger, spec, gold={})
        self._predict_trainer: pl.Trainer | None = None
        self._contexts: list[Context] = []  # document context: each piece's stream, for the collate function

    @classmethod
    def from_export(
        cls,
        export_dir: str | Path,
        device: str = "cpu",
        batch_size: int = 64,
        max_tokens: int | None = PREDICT_MAX_TOKENS,
    ) -> Predictor:
        tagger, spec = load_export(export_dir, device)
        return cls(tagger, spec, batch_size, max_tokens)

    def _collate(self, items: Sequence[tuple[int, list[str]]]) -> Batch:
        index, tokens = zip(*items, strict=True)
        batch = encode_batch(
            tokens, self.words, self.chars, index=index, max_word_chars=self.spec.max_word_chars
        )
        if self._contexts:
            batch["elmo_context"] = [self._contexts[p] for p in index]
        return batch

    def _trainer(self) -> pl.Trainer:
        """Lightning's predict loop on the tagger's device (made once, on first use)."""
        if self._predict_trainer is None:
            # Predict prints tags, not Lightning's start-up notes; its warnings about our sampler are known.
            for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
                logging.getLogger(name).setLevel(logging.WARNING)
            warnings.filterwarnings("ignore", message="You are using a custom batch sampler")
            silence_known_warnings()
            accelerator = "gpu" if self.device.type == "cuda" else "cpu"
            self._predict_trainer = pl.Trainer(
                accelerator=accelerator, devices=1, logger=False, enable_progress_bar=False,
                enable_checkpointing=False, enable_model_summary=False,
            )  # fmt: skip
        return self._predict_trainer

    def tag(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[int] | None = None
    ) -> list[tuple[list[str], list[float]]]:
        """(tags in the training scheme, probability of each predicted tag) for every sentence, in input order.

        Empty sentences get empty lists; sentences longer than ``MAX_TOKENS`` are tagged in pieces. A tagger
        trained with document context reads ``documents`` (a document id per sentence; consecutive sentences
        with one id form a document; default: one document of all) with its pieces as the stream's sentences.
        """
        pieces = split_pieces(sentences)  # (sentence index, tokens of one piece)
        self._contexts = []
        elmo = self.spec.elmo
        if elmo is not None and elmo.context == "document":
            ids = [documents[i] if documents is not None else 0 for i, _ in pieces]
            starts = [p for p in range(len(pieces)) if p == 0 or ids[p] != ids[p - 1]]
            for a, b in zip(starts, [*starts[1:], len(pieces)], strict=True):
                self._contexts += document_contexts(
                    [tokens for _, tokens in pieces[a:b]], elmo.max_stream_positions
                )
        results: dict[int, tuple[list[str], list[float]]] = {}
        if pieces:
            items: Any = [
                (p, tokens) for p, (_, tokens) in enumerate(pieces)
            ]  # a list is a map-style dataset
            loader: DataLoader[Any] = DataLoader(
                items,
                # by length; in document context in stream order, so that a batch runs few streams
                batch_sampler=LengthBucketSampler(
                    [len(t) for _, t in pieces],
                    self.batch_size,
                    max_tokens=self.max_tokens,
                    keep_order=bool(self._contexts),
                ),  # fmt: skip
                collate_fn=self._collate,
            )
            for index, paths, chosen in self._trainer().predict(self._module, dataloaders=loader) or []:
                for row, p in enumerate(index.tolist()):
                    n = len(pieces[p][1])
                    results[p] = (self.tags.decode(paths[row, :n].tolist()), chosen[row, :n].tolist())
        return join_pieces(pieces, results, len(sentences))

    def to_source(self, tags: Sequence[str]) -> list[str]:
        """Tags of the training scheme in the scheme of the training files (IOB1 for CoNLL-2003)."""
        return convert(tags, self.scheme, self.source_scheme)

    def predict_texts(self, lines: Iterable[str], chunk: int = 512) -> Iterator[dict[str, Any]]:
        """One ``{"text", "entities": [{"start", "end", "type", "text", "score"}]}`` per line; offsets index
        into the line. Lines are processed ``chunk`` at a time so that batches mix sentences across lines."""
        return predict_lines(lines, self.tag, self.scheme, chunk)


def predict_conll(predictor: Predictor, lines: Iterable[str]) -> Iterator[str]:
    """Append the predicted tag (original scheme) to every token line; other lines pass through.

    ``-DOCSTART-`` lines separate documents; a file without any is one document (document context reads it
    in chunks of ``max_stream_positions``)."""
    blocks = list(conll_blocks(lines))
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
        tags = predictor.to_source(next(tagged)[0])
        yield from (f"{line} {tag}" for line, tag in zip(block, tags, strict=True))
