"""Distillation's parts without training: the student's differentiable CRF marginals against a brute-force
oracle, the loss's gradient, the marginals folder (round trip, refusals) and the batches of one kind."""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF
from ner_app.text.soft_labels import (
    FORMAT,
    MarginalsManifest,
    SoftLabelError,
    TeacherRecord,
    chunk_names,
    done_chunks,
    read_soft_labels,
    write_chunk,
    write_manifest,
)
from ner_app.train.distillation import DistillationBatches, SoftEpochWindow
from ner_app.train.sampler import LengthBucketSampler

TAGS = ["O", "B-PER", "E-PER", "I-PER", "S-PER"]


def brute_marginals(crf: CRF, emissions: torch.Tensor, length: int) -> torch.Tensor:
    """Every path of one row enumerated: each tag's posterior at each position (length, K)."""
    start, trans, end = (x.detach().double() for x in crf._scores())
    e = emissions.double()
    k = emissions.size(-1)
    probs = torch.zeros(length, k, dtype=torch.float64)
    total = 0.0
    for path in itertools.product(range(k), repeat=length):
        score = start[path[0]] + end[path[-1]] + sum(e[t, path[t]] for t in range(length))
        score = score + sum(trans[path[t], path[t + 1]] for t in range(length - 1))
        weight = math.exp(float(score))
        total += weight
        for t, tag in enumerate(path):
            probs[t, tag] += weight
    return probs / total


@pytest.mark.parametrize("constrained", [False, True])
def test_log_marginals_equal_brute_force_and_the_prediction_marginals(constrained):
    torch.manual_seed(0)
    allowed = allowed_transitions(TAGS, "BIOES") if constrained else None
    crf = CRF(len(TAGS), allowed)
    emissions = torch.randn(3, 4, len(TAGS)) * 2
    lengths = [4, 2, 1]
    mask = torch.tensor([[t < n for t in range(4)] for n in lengths])
    log_p = crf.log_marginals(emissions, mask)
    fast = crf.marginals(emissions, mask)
    for b, n in enumerate(lengths):
        oracle = brute_marginals(crf, emissions[b], n)
        torch.testing.assert_close(log_p[b, :n].exp().double(), oracle, atol=1e-5, rtol=0)
        torch.testing.assert_close(fast[b, :n].double(), oracle, atol=1e-5, rtol=0)


def test_a_row_alone_equals_it_in_a_batch():
    torch.manual_seed(1)
    crf = CRF(len(TAGS), allowed_transitions(TAGS, "BIOES"))
    emissions = torch.randn(2, 5, len(TAGS))
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    batch = crf.log_marginals(emissions, mask)
    alone = crf.log_marginals(emissions[1:, :3], mask[1:, :3])
    torch.testing.assert_close(batch[1, :3], alone[0], atol=1e-5, rtol=0)


def test_the_loss_gradient_vanishes_where_the_student_already_holds_the_teachers_marginals():
    # d/dtheta -sum_k q_k log p_k = -sum_k p_k d log p_k = -d sum_k p_k = 0 when q = p: the fixed point
    torch.manual_seed(2)
    crf = CRF(len(TAGS), allowed_transitions(TAGS, "BIOES"))
    emissions = torch.randn(2, 6, len(TAGS), requires_grad=True)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    own = crf.log_marginals(emissions, mask).exp().detach()
    loss = -(own * crf.log_marginals(emissions, mask)).sum(dim=2)[mask].sum()
    loss.backward()
    assert emissions.grad is not None and float(emissions.grad.abs().max()) < 1e-4
    assert float(crf.transitions.grad.abs().max()) < 1e-4
    # other targets pull: the gradient is not zero
    emissions.grad, crf.transitions.grad = None, None
    other = torch.softmax(torch.randn(2, 6, len(TAGS)), dim=2)
    (-(other * crf.log_marginals(emissions, mask)).sum(dim=2)[mask].sum()).backward()
    assert float(emissions.grad.abs().max()) > 1e-2


def folder_of(tmp_path: Path, chunks: list[list[list[str]]], tags: list[str] = TAGS, seed: int = 0) -> Path:
    """A complete marginals folder holding ``chunks`` of sentences with random marginals."""
    rng = np.random.default_rng(seed)
    root = tmp_path / "marginals"
    root.mkdir()
    for index, sentences in enumerate(chunks):
        tokens = sum(map(len, sentences))
        write_chunk(root, index, sentences, rng.dirichlet(np.ones(len(tags)), size=tokens))
    manifest = MarginalsManifest(
        FORMAT,
        [TeacherRecord("teacher", "teacher-0123abcd")],
        "text.txt",
        "0" * 64,
        "BIOES",
        tags,
        2,
        complete=True,
        chunks=len(chunks),
        sentences=sum(map(len, chunks)),
        tokens=sum(len(s) for c in chunks for s in c),
    )
    write_manifest(root, manifest)
    return root


CHUNKS = [[["Ann", "met", "Bo"], ["Hi"]], [["Cy", "left", "."]]]


def test_marginals_folder_round_trip_and_column_order(tmp_path):
    root = folder_of(tmp_path, CHUNKS)
    assert done_chunks(root) == 2
    labels = read_soft_labels(root)
    assert labels.sentences == [s for c in CHUNKS for s in c]
    assert labels.targets.dtype == np.float16 and labels.targets.shape == (7, len(TAGS))
    assert labels.rows(1).shape == (1, len(TAGS))
    np.testing.assert_allclose(labels.targets.astype(np.float32).sum(axis=1), 1.0, atol=0.01)
    shuffled = list(reversed(TAGS))
    moved = labels.in_order(shuffled, "here")
    for tag in TAGS:
        np.testing.assert_array_equal(
            moved.targets[:, shuffled.index(tag)], labels.targets[:, TAGS.index(tag)]
        )
    assert read_soft_labels(root, max_sentences=2).sentences == CHUNKS[0]
    assert read_soft_labels(root, max_sentences=3).sentences == [*CHUNKS[0], CHUNKS[1][0]]


def test_a_student_of_other_types_is_refused_in_one_line(tmp_path):
    labels = read_soft_labels(folder_of(tmp_path, CHUNKS))
    with pytest.raises(SoftLabelError) as err:
        labels.in_order(["O", "B-LOC", "E-LOC", "I-LOC", "S-LOC"], "distill.marginals m")
    assert str(err.value) == (
        "distill.marginals m: the teachers' tags differ from the training data's (only in the data: ['B-LOC', "
        "'E-LOC', 'I-LOC', 'S-LOC']; only the teachers': ['B-PER', 'E-PER', 'I-PER', 'S-PER']); distil teachers "
        "trained on the same entity types"
    )


def damage(root: Path, name: str, payload: bytes) -> None:
    (root / name).write_bytes(payload)


def npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "payload", "message"),
    [
        (
            chunk_names(0)[0],
            npy(np.array([{"a": 1}], dtype=object), allow_pickle=True),
            "not a NumPy array file (Object arrays cannot be loaded when allow_pickle=False)",
        ),
        (chunk_names(0)[0], npy(np.full((4, 5), 0.5, dtype=np.float16)), "row 0 sums to 2.5000, not 1"),
        (chunk_names(0)[0], npy(np.full((4, 5), 0.2, dtype=np.float32)), "expected float16 marginals"),
        (
            chunk_names(0)[0],
            npy(np.full((3, 5), 0.2, dtype=np.float16)),
            "3 rows, but chunk-00000.jsonl holds 4",
        ),
        (chunk_names(0)[1], b'["Ann", "met", "Bo"]\n{"x": 1}\n', "chunk-00000.jsonl:2: expected a JSON list"),
        (chunk_names(0)[1], b'["Ann", "", "Bo"]\n["Hi"]\n', "chunk-00000.jsonl:1: expected a JSON list"),
        ("teachers.json", b'{"format": "other"}', "format 'other' is not 'ner_app.teacher_marginals/1'"),
        ("teachers.json", b"[1, 2", "teachers.json:1: not valid JSON"),
    ],
)
def test_a_damaged_marginals_folder_is_one_line(tmp_path, name, payload, message):
    root = folder_of(tmp_path, CHUNKS)
    damage(root, name, payload)
    with pytest.raises(SoftLabelError) as err:
        read_soft_labels(root)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_unfinished_folder_says_how_to_finish_it(tmp_path):
    root = folder_of(tmp_path, CHUNKS)
    manifest = json.loads((root / "teachers.json").read_text())
    (root / "teachers.json").write_text(json.dumps({**manifest, "complete": False}))
    with pytest.raises(SoftLabelError, match=r"incomplete \(2 chunks written\); run ner-app distill again"):
        read_soft_labels(root)


def test_an_epoch_holds_every_gold_and_soft_batch_once_each_of_one_kind():
    gold = LengthBucketSampler([3, 5, 2, 7, 4, 4], 2, shuffle=True, seed=3)
    soft = LengthBucketSampler([2, 2, 9, 1, 3], 2, shuffle=True, seed=3)
    from ner_app.train.case_augment import CaseAugmentedBatches

    batches = DistillationBatches(CaseAugmentedBatches(gold, 6, 0.5, 3), soft, 6, seed=3)
    epochs = []
    for epoch in (0, 0, 1):
        batches.set_epoch(epoch)
        drawn = list(batches)
        assert len(drawn) == len(batches) == 3 + 3
        indices = sorted(i for b in drawn for i, _ in b)
        assert indices == list(range(11))
        for b in drawn:  # one kind a batch
            assert len({i < 6 for i, _ in b}) == 1
            assert all(view == "cased" for i, view in b if i >= 6)
        epochs.append(drawn)
    assert epochs[0] == epochs[1] and epochs[0] != epochs[2]


def test_an_unfinished_folder_serves_the_prefix_its_written_chunks_hold(tmp_path):
    root = folder_of(tmp_path, CHUNKS)  # chunks of 2 sentences: the first holds sentences 1-2
    manifest = json.loads((root / "teachers.json").read_text())
    (root / "teachers.json").write_text(json.dumps({**manifest, "complete": False, "chunks": 0}))
    for name in chunk_names(1):
        (root / name).unlink()  # the second chunk not written yet
    assert read_soft_labels(root, max_sentences=2).sentences == CHUNKS[0]
    with pytest.raises(SoftLabelError, match=r"incomplete \(1 chunks written\)"):
        read_soft_labels(root, max_sentences=3)


@pytest.mark.parametrize("sentences", [1, 4, 7, 11, 40])
def test_epoch_windows_read_every_soft_sentence_once_a_pass_and_the_same_on_a_resume(sentences):
    lengths = [(i * 7) % 13 + 1 for i in range(23)]
    pool = LengthBucketSampler(
        lengths, 3, shuffle=True, seed=5, max_tokens=24
    )  # the budget makes short batches
    window = SoftEpochWindow(pool, sentences)
    per_pass = len(pool)
    assert len(window) == max(1, round(per_pass * min(sentences, 23) / 23))
    stream = []
    for epoch in range(3 * per_pass):  # the epochs' windows, end to end, are the passes, end to end
        window.set_epoch(epoch)
        drawn = list(window)
        assert len(drawn) == len(window)
        stream.extend(drawn)
    for p in range(3):
        pass_batches = stream[p * per_pass : (p + 1) * per_pass]
        assert sorted(i for b in pass_batches for i in b) == list(range(23))  # every sentence once a pass
    resumed = SoftEpochWindow(LengthBucketSampler(lengths, 3, shuffle=True, seed=5, max_tokens=24), sentences)
    resumed.set_epoch(4)
    window.set_epoch(4)
    assert list(resumed) == list(window)


def test_epoch_windows_give_every_rank_a_disjoint_share_of_the_same_count():
    lengths = [i % 9 + 1 for i in range(40)]
    shares = []
    for rank in (0, 1):
        window = SoftEpochWindow(
            LengthBucketSampler(lengths, 4, shuffle=True, seed=2), 15, world=2, rank=rank
        )
        window.set_epoch(3)
        shares.append(list(window))
        assert (
            len(shares[-1]) == len(window) == 2
        )  # 4 whole batches (15 of 40 sentences, 10 batches), 2 a rank
    ids = [i for share in shares for b in share for i in b]
    assert len(ids) == len(set(ids)) == 16
    with pytest.raises(ValueError, match="one replica"):
        SoftEpochWindow(LengthBucketSampler(lengths, 4, shuffle=True, num_replicas=2), 15)


def test_a_windowed_epoch_holds_every_gold_batch_and_the_window():
    from ner_app.train.case_augment import CaseAugmentedBatches

    gold = LengthBucketSampler([3, 5, 2, 7, 4, 4], 2, shuffle=True, seed=3)
    window = SoftEpochWindow(LengthBucketSampler([2] * 20, 2, shuffle=True, seed=3), 6)
    batches = DistillationBatches(CaseAugmentedBatches(gold, 6, 0.0, 3), window, 6, seed=3)
    seen: set[int] = set()
    for epoch in range(4):
        batches.set_epoch(epoch)
        drawn = list(batches)
        assert len(drawn) == len(batches) == 3 + 3
        assert sorted(i for b in drawn for i, _ in b if i < 6) == list(range(6))
        soft = {i for b in drawn for i, _ in b if i >= 6}
        assert len(soft) == 6 and not soft & seen or epoch == 3  # 10 batches a pass: epoch 3 starts pass 2
        seen |= soft
    assert seen == set(range(6, 26))
