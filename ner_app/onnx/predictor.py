"""Tagging with an ONNX export (``ner-app export --onnx``) on onnxruntime and numpy alone: no torch.

``OnnxPredictor(folder)`` answers as ``Predictor`` does for the same sentences: ``tag`` (tags of the training
scheme and the probability of each), ``to_source`` and ``predict_texts`` (predict's JSON objects). Sentences
are batched as predict batches them (``budget_batches``: by length, at most ``batch_size`` pieces and
``max_tokens`` padded tokens a batch; longer sentences in pieces of ``ner_app.text.pieces.MAX_TOKENS``); the
biLM graph's layers feed the tagger graph and the CRF decodes in numpy (``onnx_crf``). ``tag_lines`` gives the
records of ``text/predictions.py``.
This module imports numpy, onnxruntime and only the torch-free parts of ner_app (text, files, errors, records).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ner_app.onnx.crf import Sweep, marginals, viterbi, window_probabilities
from ner_app.onnx.manifest import (
    OnnxManifest,
    OnnxModelError,
    check_checksum,
    check_crf,
    check_elmo_chars,
    check_spec,
    check_temperature,
)
from ner_app.records import read_json, sha256_file
from ner_app.text.batching import PREDICT_BATCH_SIZE, PREDICT_MAX_TOKENS, budget_batches, check_budget
from ner_app.text.pieces import join_pieces, join_readings, predict_lines, split_pieces, tag_lines
from ner_app.text.predictions import TaggedLine
from ner_app.text.readings import Lattices, ReadingOptions, SentenceReading, read_batch
from ner_app.text.tags import convert

ONNX_FORMAT = "ner_app.onnx/1"  # what onnx/export.py writes (a test keeps the two equal)
MAX_MANIFEST_BYTES = 1 << 29  # onnx.json holds the vocabularies, like tagger.json


class OnnxPredictor:
    """The tagger of an ONNX export folder; ``threads``: onnxruntime's threads per graph (default: its own).

    ``tagger_graph`` and ``bilm_graph`` (None without ELMo) are the onnxruntime sessions, ``crf`` the CRF's
    (start (K,), transitions (K, K), end (K,)) scores: for running one part alone.
    """

    def __init__(
        self,
        folder: str | Path,
        batch_size: int = PREDICT_BATCH_SIZE,
        threads: int | None = None,
        max_tokens: int | None = PREDICT_MAX_TOKENS,
    ) -> None:
        check_budget(batch_size, max_tokens)
        root = Path(folder)
        path = root / "onnx.json"
        if not path.is_file():
            raise OnnxModelError(
                f"{root}: not an ONNX export (no onnx.json); make one with ner-app export --onnx --model EXPORT "
                "--output DIR"
            )
        manifest = read_json(path, MAX_MANIFEST_BYTES, OnnxModelError, "an ONNX export manifest")
        if not isinstance(manifest, dict) or manifest.get("format") != ONNX_FORMAT:
            found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
            raise OnnxModelError(f"{path}: format {found!r} is not {ONNX_FORMAT!r}; export the model again")
        record = OnnxManifest.from_json(manifest, str(path))
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]  # it ships no type information
        except ImportError:
            raise OnnxModelError("onnxruntime is not installed: pip install onnxruntime") from None
        sums = record.sha256
        for name, digest in sums.items():
            if Path(name).name != name or name in ("", ".", ".."):  # an export is one flat folder
                raise OnnxModelError(f"{path}: {name!r} is not a file name inside the export")
            if not (root / name).is_file() or sha256_file(root / name) != digest:
                raise OnnxModelError(f"{root / name}: missing or changed after export (sha256 differs)")
        check_checksum(manifest, str(path))  # the manifest itself: its tags, sizes and char layout
        if record.quantize not in (None, "int8"):
            raise OnnxModelError(f"{path}: quantize {record.quantize!r} is not int8; export the model again")
        self.quantize = record.quantize  # None: fp32 graphs; "int8": quantized weights
        spec = record.spec
        self.words, self.chars = spec.vocab.words.build(), spec.vocab.chars.build()
        self.tags = spec.vocab.tags.build()
        self.scheme, self.source_scheme = spec.scheme, spec.source_scheme
        self.max_word_chars = spec.max_word_chars
        # a token's char ids, looked up once (a batch's width is never below a token's capped length)
        self._char_ids = functools.lru_cache(maxsize=200_000)(self._token_char_ids)
        tags = list(spec.vocab.tags.tokens)  # as written: the Vocab drops repeats and adds specials
        check_spec(
            tags, self.scheme, self.source_scheme, self.max_word_chars, spec.model.char_width, str(path)
        )
        if self.tags.itos != tags:
            raise OnnxModelError(f"{path}: spec.vocab.tags has specials; export the model again")
        # the calibration's temperature (1.0 for an export without one): probabilities only, not the path
        self.calibrated = spec.calibration is not None
        self.document_context = False  # the export refuses a biLM that reads whole documents
        self.device = "cpu"  # onnxruntime's CPU provider
        self.temperature = 1.0 if spec.calibration is None else spec.calibration.temperature
        check_temperature(self.temperature, str(path))
        self.batch_size, self.max_tokens = batch_size, max_tokens
        graphs = record.graphs
        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only
        if threads:
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1

        def checked(name: str) -> str:
            if name not in sums:  # every file the predictor reads is one whose checksum was just verified
                raise OnnxModelError(f"{path}: {name} has no sha256 entry; export the model again")
            return str(root / name)

        def session(name: str) -> Any:
            try:
                return ort.InferenceSession(checked(name), options, providers=["CPUExecutionProvider"])
            except OnnxModelError:
                raise
            except Exception as err:  # onnxruntime's own exception types vary by version
                raise OnnxModelError(f"{root / name}: onnxruntime cannot load it ({err})") from None

        self.tagger_graph = session(graphs.tagger)
        self.bilm_graph = None if graphs.bilm is None else session(graphs.bilm)
        self._elmo_chars: dict[str, Any] | None = None
        if self.bilm_graph is not None:
            layout = record.elmo_chars
            check_elmo_chars(layout, str(path))
            self._elmo_chars = layout
            self._elmo_ids = functools.lru_cache(maxsize=200_000)(self._token_elmo_ids)
        crf, k = checked(record.crf), len(self.tags)
        try:
            with np.load(crf, allow_pickle=False) as arrays:
                self.crf = tuple(arrays[name].astype(np.float32) for name in ("start", "transitions", "end"))
        except (OSError, KeyError, ValueError) as err:
            raise OnnxModelError(f"{crf}: not the CRF scores of an ONNX export ({err})") from None
        check_crf(self.crf, k, crf)
        self._check_graphs(root)

    def _check_graphs(self, root: Path) -> None:
        """Run the graphs once on a one-word sentence: a graph of another export, or one that does not fit the
        manifest, is refused here in one line rather than at the first prediction."""
        k = len(self.tags)
        try:
            emissions = self.emissions([["a"]])
        except Exception as err:  # onnxruntime's and numpy's errors: the graphs do not fit the manifest
            first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
            raise OnnxModelError(
                f"{root}: its graphs do not run on the inputs its manifest describes ({first}); export the model "
                "again"
            ) from None
        if emissions.shape != (1, 1, k) or not np.isfinite(emissions).all():
            raise OnnxModelError(
                f"{root}: tagger.onnx gives emissions of shape {emissions.shape} (expected (1, 1, {k}), finite) "
                "for one word; export the model again"
            )

    # ------------------------------------------------------------------------------ inputs
    def _token_elmo_ids(self, token: str) -> tuple[int, ...]:
        """The biLM's 50 char ids of a token, in the layout the manifest records (``char_mapper.token_to_ids``)."""
        layout = self._elmo_chars
        assert layout is not None
        if token == layout["bos_token"]:
            return tuple(layout["bos"])
        if token == layout["eos_token"]:
            return tuple(layout["eos"])
        width = layout["max_chars"]
        data = token.encode("utf-8", errors="ignore")[: width - 2]
        ids = [layout["begin_word"], *(b + layout["shift"] for b in data), layout["end_word"]]
        return tuple(ids + [layout["pad"]] * (width - len(ids)))

    def elmo_char_ids(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """char ids (B, T+2, 50) int64 of non-empty sentences with <S> and </S>: the biLM graph's input."""
        layout = self._elmo_chars
        assert layout is not None
        ids = np.zeros((len(sentences), max(len(s) for s in sentences) + 2, layout["max_chars"]), np.int64)
        for b, sentence in enumerate(sentences):
            ids[b, 0], ids[b, len(sentence) + 1] = layout["bos"], layout["eos"]
            ids[b, 1 : len(sentence) + 1] = [self._elmo_ids(t) for t in sentence]
        return ids

    def _encode(self, sentences: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """word ids (B, T) and char ids (B, T, W) as ``encode_batch`` makes them."""
        longest = max(len(s) for s in sentences)
        width = max(1, min(max(len(t) for s in sentences for t in s), self.max_word_chars))
        words = np.zeros((len(sentences), longest), dtype=np.int64)
        chars = np.zeros((len(sentences), longest, width), dtype=np.int64)
        for b, sentence in enumerate(sentences):
            words[b, : len(sentence)] = self.words.encode(sentence)
            for j, token in enumerate(sentence):
                ids = self._char_ids(token)
                chars[b, j, : len(ids)] = ids
        return words, chars

    def _token_char_ids(self, token: str) -> list[int]:
        return self.chars.encode(token[: self.max_word_chars])

    # ------------------------------------------------------------------------------ tagging
    def emissions(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """CRF emission scores (B, T, K) float32 of one batch of non-empty tokenised sentences."""
        if not sentences or min(len(s) for s in sentences) == 0:
            raise ValueError("emissions needs at least one sentence and no empty sentences")
        words, chars = self._encode(sentences)
        feeds = {"words": words, "chars": chars}
        if self.bilm_graph is not None:
            feeds["layers"] = self.bilm_graph.run(None, {"char_ids": self.elmo_char_ids(sentences)})[0]
        return self.tagger_graph.run(None, feeds)[0]

    def tag(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[int] | None = None
    ) -> list[tuple[list[str], list[float]]]:
        """(tags in the training scheme, probability of each predicted tag) for every sentence, in input order;
        empty sentences get empty lists. ``documents`` is ``Predictor.tag``'s, unused: each sentence is read
        alone (the export refuses a biLM that reads whole documents)."""
        pieces = split_pieces(sentences)
        results: dict[int, tuple[list[str], list[float]]] = {}
        for batch in budget_batches([len(t) for _, t in pieces], self.batch_size, self.max_tokens):
            tokens = [pieces[p][1] for p in batch]
            scores = self.emissions(tokens)
            lengths = np.array([len(t) for t in tokens])
            start, trans, end = self.crf
            paths = viterbi(scores, lengths, start, trans, end)
            probs = marginals(scores, lengths, start, trans, end, self.temperature)  # (B, T, K)
            chosen = np.take_along_axis(probs, paths[..., None], -1)[..., 0]
            for row, p in enumerate(batch):
                n = lengths[row]
                results[p] = (self.tags.decode(paths[row, :n].tolist()), chosen[row, :n].tolist())
        return join_pieces(pieces, results, len(sentences))

    def emission_batches(
        self, pieces: Sequence[Sequence[str]], documents: Sequence[int] | None = None
    ) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """(piece indices, emissions (B, T, K) float32, lengths (B,)) of every batch of ``pieces`` (non-empty
        sentences of at most ``MAX_TOKENS``), batched as ``tag`` batches them: what calibration and selection
        read (``documents`` unused, as ``tag``'s)."""
        for batch in budget_batches([len(t) for t in pieces], self.batch_size, self.max_tokens):
            tokens = [pieces[p] for p in batch]
            yield batch, self.emissions(tokens), np.array([len(t) for t in tokens])

    def read(
        self,
        sentences: Sequence[Sequence[str]],
        documents: Sequence[int] | None = None,
        options: ReadingOptions | None = None,
    ) -> list[SentenceReading]:
        """Each sentence's tags, entities with their reading probabilities and what ``options`` asks for, as
        ``Predictor.read`` gives them (``documents`` unused, as ``tag``'s)."""
        options = options or ReadingOptions()
        pieces = split_pieces(sentences)
        results: dict[int, SentenceReading] = {}
        itos = self.tags.itos
        tag_ids = {tag: i for i, tag in enumerate(itos)}
        for batch in budget_batches([len(t) for _, t in pieces], self.batch_size, self.max_tokens):
            tokens = [pieces[p][1] for p in batch]
            scores = self.emissions(tokens)
            lengths = np.array([len(t) for t in tokens])
            paths = viterbi(scores, lengths, *self.crf)
            tags = [self.tags.decode(paths[row, :n].tolist()) for row, n in enumerate(lengths)]
            t = self.temperature
            # as the CRF tempers them: emissions divided in float64, its float32 scores in float32
            sweep = Sweep.of(scores.astype(np.float64) / t, lengths, *(x / np.float32(t) for x in self.crf))
            outside = None
            if options.flag_missed is not None and "O" in tag_ids:
                outside = sweep.outside(tag_ids["O"]).tolist()
            probabilities = functools.partial(_window_probabilities, sweep)
            found = read_batch(tags, outside, self.scheme, tag_ids, options, probabilities)
            results.update(zip(batch, found, strict=True))
        return join_readings(pieces, results, len(sentences))

    def to_source(self, tags: Sequence[str]) -> list[str]:
        """Tags of the training scheme in the scheme of the training files (IOB1 for CoNLL-2003)."""
        return convert(tags, self.scheme, self.source_scheme)

    def tag_lines(
        self, lines: Iterable[str], chunk: int = 512, options: ReadingOptions | None = None
    ) -> Iterator[TaggedLine]:
        """One ``TaggedLine`` per line, as ``Predictor.tag_lines``; lines are tagged ``chunk`` at a time."""
        return tag_lines(lines, self.read, options, chunk)

    def predict_texts(
        self, lines: Iterable[str], chunk: int = 512, options: ReadingOptions | None = None
    ) -> Iterator[dict[str, Any]]:
        """One ``{"text", "entities": [{"start", "end", "type", "text", "score"}]}`` per line, as predict
        prints; lines are tagged ``chunk`` at a time."""
        return predict_lines(lines, self.read, options, chunk)


def _window_probabilities(sweep: Sweep, table: Lattices) -> list[float]:
    return window_probabilities(sweep, table).tolist()
