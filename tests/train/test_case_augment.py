"""Case augmentation (data.case_augment): the draw per seed and epoch, the batches that carry it to the word
embedding, the char CNN and ELMo's characters, the layer cache's views, and a tiny run that trains with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import train
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.weights import load_bilm
from ner_app.text.case import CASE_VIEWS, case_view
from ner_app.train.case_augment import CaseAugmentedBatches, case_views
from ner_app.train.corpus import load_corpus
from ner_app.train.datamodule import Collator, ConllDataModule
from ner_app.train.layer_cache import LayerCache
from ner_app.train.sampler import LengthBucketSampler
from tests.train.test_datamodule import SIZES, write_folder

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


def test_case_view_changes_characters_only() -> None:
    tokens = ["Straße", "EU", "rejects", "İz"]
    assert case_view(tokens, "cased") == tokens and case_view(tokens, "cased") is not tokens
    assert case_view(tokens, "upper") == ["STRASSE", "EU", "REJECTS", "İZ"]
    assert case_view(tokens, "lower") == ["straße", "eu", "rejects", "i̇z"]
    for view in CASE_VIEWS:
        assert len(case_view(tokens, view)) == len(tokens)
    with pytest.raises(ValueError, match="unknown case view 'title'"):
        case_view(tokens, "title")  # type: ignore[arg-type]


@pytest.mark.parametrize("count, share", [(1000, 0.3), (7, 0.5), (3, 1.0), (10, 0.04), (5, 0.0)])
def test_the_share_is_respected_half_lower_half_upper(count: int, share: float) -> None:
    views = case_views(count, share, seed=1, epoch=0)
    assert len(views) == round(share * count) and set(views) <= set(range(count))
    lower = sum(v == "lower" for v in views.values())
    assert lower == (len(views) + 1) // 2 and len(views) - lower == len(views) // 2
    assert set(views.values()) <= {"lower", "upper"}


def test_the_draw_is_deterministic_per_seed_and_epoch() -> None:
    first = case_views(500, 0.4, seed=3, epoch=2)
    assert case_views(500, 0.4, seed=3, epoch=2) == first
    assert case_views(500, 0.4, seed=3, epoch=3) != first  # a new draw each epoch
    assert case_views(500, 0.4, seed=4, epoch=2) != first  # and each seed
    # over epochs every sentence is met in another case: the draw is not one fixed subset
    seen = set().union(*(case_views(500, 0.4, seed=3, epoch=e) for e in range(20)))
    assert len(seen) > 490


def test_batches_carry_the_epochs_views_and_resume_at_any_epoch() -> None:
    lengths = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    sampler = LengthBucketSampler(lengths, 3, shuffle=True, seed=5)
    batches = CaseAugmentedBatches(sampler, len(lengths), 0.5, seed=5)
    assert batches.sampler is batches and len(batches) == len(sampler)
    batches.set_epoch(4)
    epoch4 = list(batches)
    expected = case_views(len(lengths), 0.5, 5, 4)
    assert [[i for i, _ in b] for b in epoch4] == list(sampler)  # the same batches, indices in order
    assert {i: v for b in epoch4 for i, v in b if v != "cased"} == expected
    fresh = CaseAugmentedBatches(
        LengthBucketSampler(lengths, 3, shuffle=True, seed=5), len(lengths), 0.5, seed=5
    )
    fresh.set_epoch(4)  # a resumed run: epoch 4 straight away
    assert list(fresh) == epoch4
    from lightning_fabric.utilities.data import _set_sampler_epoch

    loader = torch.utils.data.DataLoader(range(10), batch_sampler=fresh, collate_fn=list)
    _set_sampler_epoch(loader, 7)  # what Lightning's fit loop calls at the start of each epoch
    assert fresh.epoch == fresh.batches.epoch == 7


def _module(data: Path, share: float, elmo: bool = False) -> ConllDataModule:
    from ner_app.tagger.spec import ElmoRef, TaggerSpec

    corpus = load_corpus(str(data), None, "BIOES")
    ref = ElmoRef("o.json", "w.hdf5", "fp", 0.0, False) if elmo else None
    t = corpus.splits["train"]
    spec = TaggerSpec.from_training_data(
        SIZES, t.tokens, t.tags, corpus.scheme, corpus.source_scheme, lowercase=False, elmo=ref
    )
    return ConllDataModule(corpus, spec, batch_size=2, eval_batch_size=2, seed=0, case_augment=share)


def test_training_batches_show_the_view_to_words_chars_and_elmo(tmp_path: Path) -> None:
    # with ELMo: the biLM's chars are in the batches
    dm = _module(write_folder(tmp_path / "data"), 1.0, elmo=True)
    loader = dm.train_dataloader()
    loader.batch_sampler.set_epoch(0)
    views = case_views(len(dm.splits["train"]), 1.0, 0, 0)
    seen = set()
    for batch in loader:
        for row, i in enumerate(batch["index"].tolist()):
            original = dm.splits["train"].tokens[i]
            shown = case_view(original, views[i])
            seen.add(views[i])
            assert batch["tokens"][row] == shown and shown != original
            n = len(shown)
            assert batch["features"]["words"]["ids"][row, :n].tolist() == dm.spec.word_vocab.encode(
                shown
            )  # a cased vocabulary
            width = batch["features"]["chars"]["ids"].shape[2]
            for j, token in enumerate(shown):
                ids = dm.spec.char_vocab.encode(token[:width])
                assert batch["features"]["chars"]["ids"][row, j, : len(ids)].tolist() == ids
            assert torch.equal(batch["features"]["elmo"]["chars"][row, :n], batch_to_ids([shown])[0])
            tags = dm.spec.decode_tags(batch["tags"][row : row + 1], batch["mask"][row : row + 1])[0]
            assert tags == dm.splits["train"].tags[i]  # tags unchanged
    assert seen == {"lower", "upper"}
    for split in ("dev", "test"):  # evaluation reads the files as written
        for batch in dm.dataloader(split):
            for row, i in enumerate(batch["index"].tolist()):
                assert batch["tokens"][row] == dm.splits[split].tokens[i]
    plain = _module(tmp_path / "data", 0.0).train_dataloader()
    for batch in plain:
        for row, i in enumerate(batch["index"].tolist()):
            assert batch["tokens"][row] == dm.splits["train"].tokens[i]


def test_the_datamodule_refuses_a_share_outside_0_1_and_document_context(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="case_augment must be in"):
        _module(write_folder(tmp_path / "data"), 1.5)
    dm = _module(tmp_path / "data", 0.5, elmo=True)
    object.__setattr__(dm.spec.elmo, "context", "document")
    with pytest.raises(ValueError, match="sentence context"):
        dm.train_dataloader()


@pytest.mark.system
def test_a_tiny_run_trains_with_case_augmentation_and_caches_every_view(
    tmp_path, tiny_bilm_files, monkeypatch
) -> None:
    cache = tmp_path / "cache"
    shown: list[list[str]] = []  # every sentence the real Lightning loops collate
    collate = Collator.__call__
    monkeypatch.setattr(
        Collator, "__call__", lambda self, items: shown.extend(t for _, t, _ in items) or collate(self, items)
    )
    args = [
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={tmp_path / 'run'}",
        f"data.dir={TINY}",
        f"elmo.options={tiny_bilm_files[0]}",
        f"elmo.weights={tiny_bilm_files[1]}",
        f"elmo.cache_dir={cache}",
        "data.case_augment=0.5",
        "trainer.max_epochs=3",
        "trainer.threads=1",
    ]
    assert train.main(args) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= metrics["dev"]["f1"] <= 100.0
    corpus = load_corpus(str(TINY), None, "BIOES")
    written = {tuple(t) for split in corpus.splits.values() for t in split.tokens}
    changed = [t for t in shown if tuple(t) not in written]
    assert len(changed) == 3 * round(0.5 * len(corpus.splits["train"]))  # 3 epochs' draws reached the model
    opened = LayerCache.for_bilm(cache, load_bilm(*map(str, tiny_bilm_files)))
    for tokens in corpus.splits["train"].tokens:  # the epochs' batches read every view from the cache
        for view in CASE_VIEWS:
            assert case_view(tokens, view) in opened
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "case_augment: 0.5" in saved


@pytest.mark.system
@pytest.mark.slow
def test_a_case_augmented_run_resumes_exactly(tmp_path: Path, tiny_bilm_files) -> None:
    """Stopped after epoch 2 and resumed to 5, it ends with the uninterrupted run's weights: each epoch's draw
    depends on the seed and the epoch only (the layer cache on, so the views come from it)."""
    from tests.system.test_resume import assert_same_weights, final_state
    from tests.system.test_resume import train_args as resume_args

    cache, whole, parts = tmp_path / "cache", tmp_path / "whole", tmp_path / "parts"
    augment = "data.case_augment=0.6"
    assert train.main(resume_args(whole, cache, tiny_bilm_files, augment, "trainer.max_epochs=5")) == 0
    assert train.main(resume_args(parts, cache, tiny_bilm_files, augment, "trainer.max_epochs=2")) == 0
    assert (
        train.main([*resume_args(parts, cache, tiny_bilm_files, augment, "trainer.max_epochs=5"), "--resume"])
        == 0
    )
    assert_same_weights(final_state(whole), final_state(parts))
    other = resume_args(parts, cache, tiny_bilm_files, "data.case_augment=0.3", "trainer.max_epochs=6")
    assert train.main([*other, "--resume"]) == 2  # another share is another run: --resume refuses it
    plain = tmp_path / "plain"  # and the share matters: without it the same seed ends elsewhere
    assert train.main(resume_args(plain, cache, tiny_bilm_files, "trainer.max_epochs=5")) == 0
    assert any(not torch.equal(final_state(plain)[k], v) for k, v in final_state(whole).items())
