"""The frozen-layer cache: exact fp16 copies of the biLM's layers, reused across opens, rebuilt when damaged."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import pytest
import torch

from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.elmo import Elmo
from ner_app.train.layer_cache import LayerCache, bilm_fingerprint, sentence_key
from ner_app.train.layer_store import published_generations
from tests.helpers import random_bilm

SENTENCES = [
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
    ["Peter", "Blackburn"],
    [],
    ["BRUSSELS", "1996-08-22"],
    ["New", "York"],
    ["Ünïcödé", "tökens", "and", "a", "very" * 20],
]


@pytest.fixture(scope="module")
def bilm() -> torch.nn.Module:
    return random_bilm()


def open_cache(directory: Path, bilm: torch.nn.Module, verify: bool = True) -> LayerCache:
    return LayerCache(directory, bilm_fingerprint(bilm), bilm.num_layers, bilm.output_dim, verify=verify)


def direct(bilm: torch.nn.Module, sentences: list[list[str]]) -> tuple[list[torch.Tensor], torch.Tensor]:
    with torch.inference_mode():
        out = bilm(batch_to_ids(sentences))
    return out.layers, out.mask


_ALONE: dict[tuple[str, tuple[str, ...]], list[torch.Tensor]] = {}


def alone(bilm: torch.nn.Module, tokens: list[str]) -> list[torch.Tensor]:
    """Layers (T+2, 2P) of one sentence computed on its own (memoised: the tests ask for them often)."""
    key = (bilm_fingerprint(bilm), tuple(tokens))
    if key not in _ALONE:
        _ALONE[key] = [layer[0] for layer in direct(bilm, [tokens])[0]]
    return _ALONE[key]


def assert_exact(cache: LayerCache, bilm: torch.nn.Module, batch: list[list[str]]) -> None:
    """Cached layers == each sentence computed alone, rounded to fp16, bit for bit; zero at padding."""
    layers, mask = cache.lookup(batch)
    ref_layers, ref_mask = direct(bilm, batch)
    assert torch.equal(mask, ref_mask) and mask.dtype == torch.bool
    assert len(layers) == bilm.num_layers
    for b, tokens in enumerate(batch):
        n = len(tokens) + 2
        for got, ref, single in zip(layers, ref_layers, alone(bilm, tokens), strict=True):
            assert got.dtype == torch.float32 and got.shape == ref.shape
            assert torch.equal(got[b, :n], single.half().float())
            assert not got[b, n:].any()
            torch.testing.assert_close(got[b], ref[b], rtol=1e-3, atol=1e-3)  # batched fp32, fp16 precision


def test_lookup_is_the_bilm_rounded_to_fp16_in_any_batch(tmp_path: Path, bilm: torch.nn.Module) -> None:
    cache = open_cache(tmp_path, bilm)
    assert cache.fill(SENTENCES + SENTENCES[:2], bilm, batch_size=1) == len(SENTENCES)  # duplicates once
    assert len(cache) == len(SENTENCES) and all(s in cache for s in SENTENCES)
    assert_exact(cache, bilm, SENTENCES)
    assert_exact(cache, bilm, SENTENCES[::-1])
    assert_exact(cache, bilm, [SENTENCES[2]])  # only empty sentences: T = 0
    assert_exact(cache, bilm, [SENTENCES[4], SENTENCES[0], SENTENCES[4]])
    layers, mask = cache.lookup([])
    assert mask.shape == (0, 2) and layers[0].shape == (0, 2, bilm.output_dim)


def test_sentence_alone_and_in_a_batch_are_the_same(tmp_path: Path, bilm: torch.nn.Module) -> None:
    cache = open_cache(tmp_path, bilm)
    assert cache.fill(SENTENCES, bilm, batch_size=4) == len(SENTENCES)  # batched by length
    batch_layers, _ = cache.lookup(SENTENCES)
    for b, tokens in enumerate(SENTENCES):
        single, _ = cache.lookup([tokens])
        n = len(tokens) + 2
        for in_batch, one, ref in zip(batch_layers, single, alone(bilm, tokens), strict=True):
            assert torch.equal(in_batch[b, :n], one[0])
            torch.testing.assert_close(one[0], ref, rtol=1e-3, atol=1e-3)


def test_reopen_reads_without_recomputing(tmp_path: Path, bilm: torch.nn.Module) -> None:
    first = open_cache(tmp_path, bilm)
    first.fill(SENTENCES[:3], bilm)
    first.fill(SENTENCES[3:], bilm)  # a second generation appended
    before, _ = first.lookup(SENTENCES)
    again = open_cache(tmp_path, bilm)
    assert len(again) == len(SENTENCES) and again.nbytes == first.nbytes > 0
    assert again.fill(SENTENCES, bilm) == 0
    after, _ = again.lookup(SENTENCES)
    assert all(torch.equal(x, y) for x, y in zip(before, after, strict=True))
    worker = pickle.loads(pickle.dumps(again))  # how a DataLoader worker receives it
    assert torch.equal(worker.lookup(SENTENCES)[0][1], after[1])


def test_every_fill_publishes_a_generation_even_one_that_adds_nothing(
    tmp_path: Path, bilm: torch.nn.Module
) -> None:
    """A new manifest generation says a fill finished (``train --seeds --parallel`` waits for it); the rows and
    what a lookup gives stay the same."""
    assert published_generations(tmp_path) == {}
    cache = open_cache(tmp_path, bilm)
    cache.fill(SENTENCES, bilm)
    first = published_generations(tmp_path)
    assert list(first.values()) == [1] and list(first) == [cache.root.name]
    before, _ = cache.lookup(SENTENCES)
    again = open_cache(tmp_path, bilm)
    assert again.fill(SENTENCES, bilm) == 0
    assert published_generations(tmp_path) == {cache.root.name: 2}
    assert sorted(p.name for p in cache.root.glob("index-*")) == ["index-2.bin"]
    after, _ = open_cache(tmp_path, bilm).lookup(SENTENCES)
    assert all(torch.equal(x, y) for x, y in zip(before, after, strict=True))
    (cache.root / "manifest.json").write_text("{")
    assert published_generations(tmp_path) == {cache.root.name: -1}


def test_changed_weight_misses(tmp_path: Path, bilm: torch.nn.Module) -> None:
    cache = open_cache(tmp_path, bilm)
    cache.fill(SENTENCES, bilm, batch_size=1)  # bit-exact comparisons below are against sentences alone
    changed = random_bilm()
    with torch.no_grad():
        changed.lstm.forward_layers[1].projection.weight[0, 0] += 1e-3
    assert bilm_fingerprint(changed) != bilm_fingerprint(bilm) == bilm_fingerprint(random_bilm())
    other = open_cache(tmp_path, changed)
    assert len(other) == 0 and SENTENCES[0] not in other
    assert other.fill(SENTENCES, changed, batch_size=1) == len(SENTENCES)
    assert_exact(other, changed, SENTENCES)
    with pytest.raises(ValueError, match="not the one of the cache"):
        cache.fill([["unseen"]], changed)  # the wrong biLM must not write into this cache
    assert_exact(open_cache(tmp_path, bilm), bilm, SENTENCES)  # the old cache is untouched


def test_changed_tokenisation_misses(tmp_path: Path, bilm: torch.nn.Module) -> None:
    assert sentence_key(["New York"]) != sentence_key(["New", "York"])
    assert sentence_key(["a\x00b", "c"]) != sentence_key(["a", "b\x00c"])
    cache = open_cache(tmp_path, bilm)
    cache.fill([["New", "York"]], bilm)
    assert ["New York"] not in cache
    with pytest.raises(KeyError, match="New York"):
        cache.lookup([["New", "York"], ["New York"]])
    assert cache.fill([["New York"]], bilm) == 1


def damage_truncate(root: Path) -> None:
    data = root / "layers.f16"
    data.write_bytes(data.read_bytes()[:-3])


def damage_flip_byte(root: Path) -> None:
    raw = bytearray((root / "layers.f16").read_bytes())
    raw[len(raw) // 2] ^= 0x40
    (root / "layers.f16").write_bytes(bytes(raw))


def damage_no_manifest(root: Path) -> None:
    (root / "manifest.json").unlink()


def damage_garbled_manifest(root: Path) -> None:
    (root / "manifest.json").write_text('{"format": "ner_app.layer_cache/1", "rows": ')


def damage_index(root: Path) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    (root / f"index-{manifest['generation']}.bin").write_bytes(b"\x00" * 48)


@pytest.mark.parametrize(
    "damage,reason",
    [
        (damage_truncate, "truncated"),
        (damage_flip_byte, "checksum"),
        (damage_no_manifest, "no manifest"),
        (damage_garbled_manifest, "unreadable manifest"),
        (damage_index, "index"),
    ],
)
def test_damage_is_detected_and_rebuilt(
    tmp_path: Path, bilm: torch.nn.Module, caplog: pytest.LogCaptureFixture, damage, reason: str
) -> None:
    cache = open_cache(tmp_path, bilm)
    cache.fill(SENTENCES, bilm, batch_size=1)
    damage(cache.root)
    with caplog.at_level(logging.WARNING, logger="ner_app.train.layer_cache"):
        rebuilt = open_cache(tmp_path, bilm)
    assert any(reason in r.getMessage() and "rebuilding" in r.getMessage() for r in caplog.records)
    assert len(rebuilt) == 0 and sorted(p.name for p in rebuilt.root.iterdir()) == [".lock"]
    assert rebuilt.fill(SENTENCES, bilm, batch_size=1) == len(SENTENCES)
    assert_exact(rebuilt, bilm, SENTENCES)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ner_app.train.layer_cache"):
        assert len(open_cache(tmp_path, bilm)) == len(SENTENCES)  # the rebuilt cache verifies cleanly
    assert not caplog.records


def test_interrupted_append_is_ignored_then_overwritten(
    tmp_path: Path, bilm: torch.nn.Module, caplog: pytest.LogCaptureFixture
) -> None:
    cache = open_cache(tmp_path, bilm)
    cache.fill(SENTENCES[:4], bilm, batch_size=1)
    with open(cache.root / "layers.f16", "ab") as f:
        f.write(b"\x7f" * 1000)  # rows of a fill that crashed before publishing its manifest
    with caplog.at_level(logging.WARNING, logger="ner_app.train.layer_cache"):
        reopened = open_cache(tmp_path, bilm)
    assert any("interrupted fill" in r.getMessage() for r in caplog.records)
    assert len(reopened) == 4 and SENTENCES[4] not in reopened
    assert reopened.fill(SENTENCES, bilm, batch_size=1) == len(SENTENCES) - 4
    assert_exact(open_cache(tmp_path, bilm), bilm, SENTENCES)  # verify=True: the junk is gone


def test_elmo_mix_on_cached_layers_matches_elmo(tmp_path: Path, bilm: torch.nn.Module) -> None:
    elmo = Elmo(bilm, num_output_representations=2, dropout=0.0).eval()
    with torch.no_grad():
        for i, mix in enumerate(elmo.scalar_mixes):  # distinct, non-uniform weights
            mix.scalar_parameters.copy_(torch.arange(bilm.num_layers, dtype=torch.float) * (i + 1) * 0.3)
    cache = open_cache(tmp_path, bilm)
    cache.fill(SENTENCES, bilm)
    with torch.no_grad():
        ref = elmo(batch_to_ids(SENTENCES))
        got = elmo.mix(*cache.lookup(SENTENCES))
    assert torch.equal(got.mask, ref.mask)
    for g, r in zip(got.representations, ref.representations, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-3, atol=1e-3)
