"""A disk cache of a frozen biLM's L+1 layers: computed once per distinct sentence, read by every later epoch.

``LayerCache`` keys sentences (``sentence_key``) under the fingerprint of the exact biLM (``bilm_fingerprint``),
reads batches of them back in the biLM's output layout, and fills what is missing: a fill computes into an
anonymous temp file, then appends under the cache's lock. The files, their integrity checks and the crash-safe
publish are ``LayerStore``'s (``layer_cache_store.py``).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.document import (
    BATCH_POSITIONS,
    MAX_POSITIONS,
    Stream,
    document_contexts,
    document_keys,
    stream_batches,
    stream_positions,
)
from ner_app.bilm.weights import bilm_fingerprint
from ner_app.progress import track
from ner_app.tagger.features import CacheSource
from ner_app.tagger.features.elmo import bilm_source
from ner_app.text.batching import budget_batches
from ner_app.train.layer_store import _STAGE, CacheInvalid, LayerCacheError, LayerStore, MissingLayers

__all__ = [
    "CacheInvalid",
    "LayerCache",
    "LayerCacheError",
    "MissingLayers",
    "fill_document_cache",
    "sentence_key",
]


FILL_MAX_TOKENS = 8192  # padded tokens a biLM call of ``LayerCache.fill`` reads at most (64 x 128)


def sentence_key(tokens: Sequence[str]) -> bytes:
    """32-byte sha256 of the exact tokens; a JSON list quotes every token, so ["New York"] != ["New", "York"]."""
    return hashlib.sha256(json.dumps(list(tokens), ensure_ascii=True).encode("ascii")).digest()


class LayerCache(LayerStore):
    """fp16 layers (L+1, T+2, 2P) of every sentence filled in, keyed by ``sentence_key``; see the module doc."""

    @classmethod
    def for_bilm(cls, directory: str | Path, bilm: BidirectionalLM, verify: bool = True) -> LayerCache:
        """The cache folder of this exact biLM (architecture and weights)."""
        return cls(directory, bilm_fingerprint(bilm), bilm.num_layers, bilm.output_dim, verify)

    @classmethod
    def for_source(cls, directory: str | Path, source: CacheSource, verify: bool = True) -> LayerCache:
        """The cache folder of this exact frozen encoder (a feature's ``cache_source``)."""
        return cls(directory, source.fingerprint, source.num_layers, source.dim, verify)

    def __contains__(self, tokens: Sequence[str]) -> bool:
        return sentence_key(tokens) in self._index

    def lookup(self, batch: Sequence[Sequence[str]]) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Cached layers of a batch: L+1 float32 tensors (B, T+2, 2P), zero at padding, and mask (B, T+2).

        The layout of ``BiLMOutput``, so ``Elmo.mix(layers, mask)`` takes it as it is.
        """
        return self.lookup_keys([sentence_key(tokens) for tokens in batch], batch)

    def lookup_keys(
        self, keys: Sequence[bytes], shown: Sequence[Sequence[str]] | None = None
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``lookup`` by key (e.g. a sentence in its document context); ``shown`` names the sentences in errors."""
        spans = []  # (first row, T_b + 2) per sentence
        for b, key in enumerate(keys):
            span = self._index.get(key)
            if span is None:
                tokens = list(shown[b]) if shown is not None else [key.hex()]
                text = " ".join(tokens) if len(tokens) < 30 else " ".join(tokens[:30]) + " ..."
                raise MissingLayers(f"sentence not in the layer cache (fill it first): {text!r}")
            spans.append(span)
        width = max((n for _, n in spans), default=2)
        out = torch.empty(self.num_layers, len(spans), width, self.dim)  # (L+1, B, T+2, 2P)
        data = self._data
        for b, (first, n) in enumerate(spans):
            assert data is not None  # a sentence found in the index has rows in the data file
            # A contiguous slice of the memmap per sentence; torch's fp16 -> fp32 copy is vectorised and,
            # unlike a boolean-mask scatter, touches every output byte once.
            out[:, b, :n] = data[first : first + n].permute(1, 0, 2)  # (L+1, T_b+2, 2P)
            if n < width:
                out[:, b, n:] = 0
        lengths = torch.tensor([n for _, n in spans], dtype=torch.long)  # (B,)
        mask = torch.arange(width)[None, :] < lengths[:, None]  # (B, T+2)
        return list(out.unbind(0)), mask

    def fill(
        self,
        sentences: Sequence[Sequence[str]],
        bilm: BidirectionalLM | CacheSource,
        batch_size: int = 64,
        device: str | torch.device = "cpu",
        progress: bool = False,
        max_tokens: int | None = FILL_MAX_TOKENS,
        label: str = "biLM",
    ) -> int:
        """Compute and append the layers of every distinct sentence not cached yet; returns how many.

        ``bilm``: a biLM or any frozen feature's ``CacheSource``; ``device`` is where it already lives. Batches
        hold at most ``batch_size`` sentences and ``max_tokens`` padded tokens (``budget_batches``; None: no cap). Rows are rounded to fp16 once, here;
        ``label`` names the encoder in the progress line.
        """
        source = _source(bilm)
        todo: dict[bytes, list[str]] = {}
        for tokens in sentences:
            key = sentence_key(tokens)
            if key not in self._index and key not in todo:
                todo[key] = list(tokens)
        pending = list(todo)
        # by length, so that batches of similar length waste little padding
        groups = budget_batches([len(todo[k]) for k in pending], batch_size, max_tokens)

        def batches() -> Iterator[tuple[list[tuple[bytes, int]], torch.Tensor]]:
            for group in track(groups, label, unit="batch", enabled=progress):
                keys = [pending[i] for i in group]
                layers, mask = source.sentence_layers([todo[k] for k in keys], torch.device(device))
                rows = torch.stack(layers, dim=2)[mask]  # (N, L+1, 2P)
                yield [(k, len(todo[k]) + 2) for k in keys], rows

        return self.fill_rows(source, len(pending), batches())

    def fill_rows(
        self,
        bilm: BidirectionalLM | CacheSource,
        count: int,
        batches: Iterable[tuple[list[tuple[bytes, int]], torch.Tensor]],
    ) -> int:
        """Append what ``batches`` computes with ``bilm``: (keys with their row counts, rows (N, L+1, 2P)) each.

        The generator runs here in eval and inference mode, after the biLM was checked to be this cache's
        one; ``count`` is how many keys it will give (0: nothing to compute, and the cache is published as it is,
        which says that this fill is done: ``published_generations``). Returns ``count``.
        """
        if not count:
            self.publish()
            return 0
        source = _source(bilm)
        if source.stateful:
            raise LayerCacheError("a stateful biLM's layers depend on earlier batches; they cannot be cached")
        if (source.num_layers, source.dim) != (
            self.num_layers,
            self.dim,
        ) or source.fingerprint != self.fingerprint:
            raise LayerCacheError(
                f"this biLM is not the one of the cache {self.root}: its layers would poison it"
            )
        staged: list[tuple[bytes, int, int]] = []  # (key, first row in the stage file, rows)
        module = source.module
        was_training = module.training
        # Staging in an anonymous file keeps the lock short and leaves nothing behind after a crash.
        with tempfile.TemporaryFile(dir=self.root, prefix=_STAGE) as stage:
            try:
                module.eval()
                with torch.inference_mode():
                    for entries, computed in batches:
                        rows = computed.half().cpu()  # (N, L+1, 2P)
                        if rows.shape[0] != sum(n for _, n in entries):
                            raise LayerCacheError("computed rows do not match their keys' row counts")
                        if not torch.isfinite(rows).all():
                            raise LayerCacheError("biLM layers overflow float16; they cannot be cached")
                        stage.write(rows.numpy().tobytes())
                        first = staged[-1][1] + staged[-1][2] if staged else 0
                        for key, n in entries:
                            staged.append((key, first, n))
                            first += n
            finally:
                module.train(was_training)
            with self._locked():
                self._open(verify=False)  # take in what another process published meanwhile
                self._append(stage, staged)
        return count


def fill_document_cache(
    cache: LayerCache,
    documents: Sequence[Sequence[Sequence[str]]],
    bilm: BidirectionalLM | CacheSource,
    max_positions: int = MAX_POSITIONS,
    progress: bool = False,
    max_tokens: int | None = BATCH_POSITIONS,
    label: str = "biLM",
) -> int:
    """Cache the layers of every sentence of ``documents`` read in document context (keys: ``document_keys``).

    Streams run ``max_tokens`` padded positions a biLM call at most (``stream_batches``). Returns how many
    sentences were computed; documents already cached cost one hash each.
    """
    todo: dict[bytes, tuple[Stream, list[bytes]]] = {}  # first key -> a stream to compute and its keys
    for document in documents:
        keys = document_keys(document, max_positions)
        for start, (stream, k) in enumerate(document_contexts(document, max_positions)):
            chunk_keys = keys[start : start + len(stream)]
            if k == 0 and not all(cache.has_key(key) for key in chunk_keys):
                todo.setdefault(chunk_keys[0], (stream, chunk_keys))  # the same document twice runs once
    jobs = list(todo.values())
    source = _source(bilm)
    read = source.stream_layers
    if read is None:
        raise LayerCacheError("this frozen encoder does not read documents: no document-context cache")

    def batches() -> Iterator[tuple[list[tuple[bytes, int]], torch.Tensor]]:
        groups = list(stream_batches([stream_positions(stream) for stream, _ in jobs], max_tokens))
        for group in track(groups, f"{label} streams", unit="batch", enabled=progress):
            chosen = [jobs[i] for i in group]
            entries, rows = [], []
            for (_, keys), layers in zip(chosen, read([s for s, _ in chosen]), strict=True):
                for key, sentence_rows in zip(keys, layers, strict=True):
                    entries.append((key, sentence_rows.shape[1]))
                    rows.append(sentence_rows.permute(1, 0, 2))  # (n+2, L+1, 2P)
            yield entries, torch.cat(rows)

    return cache.fill_rows(source, sum(len(keys) for _, keys in jobs), batches())


def _source(encoder: BidirectionalLM | CacheSource) -> CacheSource:
    """A biLM as the cache's source of layers (the fingerprint of its weights computed once); a source as is."""
    return encoder if isinstance(encoder, CacheSource) else bilm_source(encoder)
