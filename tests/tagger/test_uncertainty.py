"""Active-learning uncertainty of the CRF against brute force: 2-best Viterbi, least confidence, margin, token
entropy and MNLP by enumerating every tag path of tiny CRFs (constraints, padding and a temperature included)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF
from ner_app.tagger.crf.uncertainty import SentenceUncertainty, combine, sentence_uncertainty, two_best

BIOES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "S-LOC"]


def make_crf(num_tags: int, allowed=None, seed: int = 1, temperature: float = 1.0) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(num_tags, allowed)
    with torch.no_grad():
        for p in crf.parameters():
            p.uniform_(-1.5, 1.5)
    crf.temperature = temperature
    return crf.double()  # float64 throughout, so that the oracle's agreement can be tight


def batch(num_tags: int, lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    steps = max(lengths)
    emissions = torch.randn(len(lengths), steps, num_tags, generator=gen, dtype=torch.float64) * 1.5
    mask = torch.arange(steps)[None, :] < torch.tensor(lengths)[:, None]
    return emissions, mask


def enumerate_paths(
    crf: CRF, emissions: torch.Tensor, length: int
) -> tuple[list[tuple[int, ...]], torch.Tensor]:
    """Every tag path of one sentence (forbidden ones too, at their finite forbidden score) and its tempered
    score, in float64: the brute-force distribution the CRF defines."""
    start, trans, end = (s.detach().double() / crf.temperature for s in crf._scores())
    em = emissions[:length].double() / crf.temperature
    paths = list(itertools.product(range(crf.num_tags), repeat=length))
    scores = [
        start[p[0]]
        + end[p[-1]]
        + sum(em[t, y] for t, y in enumerate(p))
        + sum(trans[a, b] for a, b in itertools.pairwise(p))
        for p in paths
    ]
    return paths, torch.stack([torch.as_tensor(s) for s in scores])


def oracle(crf: CRF, emissions: torch.Tensor, length: int) -> dict[str, object]:
    paths, scores = enumerate_paths(crf, emissions, length)
    log_z = torch.logsumexp(scores, dim=0)
    order = torch.argsort(scores, descending=True)
    probs = torch.exp(scores - log_z)
    marginals = torch.zeros(length, crf.num_tags, dtype=torch.float64)
    for p, prob in zip(paths, probs, strict=True):
        for t, y in enumerate(p):
            marginals[t, y] += prob
    entropy = float(-(marginals * marginals.clamp(min=1e-300).log()).sum())
    second = float(scores[order[1]]) if len(paths) > 1 else -math.inf
    return {
        "paths": [paths[int(order[0])], paths[int(order[1])] if len(paths) > 1 else None],
        "scores": [float(scores[order[0]]), second],
        "log_best": float(scores[order[0]] - log_z),
        "log_second": second - float(log_z),
        "entropy_sum": entropy,
    }


CASES = [
    pytest.param(4, None, [3, 1, 2], 1.0, id="free-4-tags"),
    pytest.param(len(BIOES), allowed_transitions(BIOES, "BIOES"), [4, 2, 3, 1], 1.0, id="bioes-constrained"),
    pytest.param(3, None, [4, 4], 2.5, id="temperature-2.5"),
    pytest.param(
        len(BIOES), allowed_transitions(BIOES, "BIOES"), [3, 3], 0.7, id="constrained-temperature-0.7"
    ),
]


@pytest.mark.parametrize(("k", "allowed", "lengths", "temperature"), CASES)
def test_two_best_and_uncertainty_equal_enumeration(k, allowed, lengths, temperature) -> None:
    crf = make_crf(k, allowed, temperature=temperature)
    emissions, mask = batch(k, lengths)
    em, start, trans, end = crf._tempered(emissions)
    paths, scores = two_best(em, start, trans, end, mask)
    found = sentence_uncertainty(crf, emissions, mask)
    for row, n in enumerate(lengths):
        want = oracle(crf, emissions[row], n)
        assert scores[row].tolist() == pytest.approx(want["scores"], abs=1e-8)
        assert tuple(paths[row, 0, :n].tolist()) == want["paths"][0]
        assert tuple(paths[row, 1, :n].tolist()) == want["paths"][1]
        assert paths[row, :, n:].eq(0).all()  # padding
        u = found[row]
        assert u.tokens == n
        assert u.log_best == pytest.approx(want["log_best"], abs=1e-8)
        assert u.log_second == pytest.approx(want["log_second"], abs=1e-6)
        assert u.entropy_sum == pytest.approx(want["entropy_sum"], abs=1e-8)
        p1, p2 = math.exp(want["log_best"]), math.exp(want["log_second"])
        assert u.least_confidence == pytest.approx(1 - p1, abs=1e-8)
        assert u.margin == pytest.approx(p1 - p2, abs=1e-8)
        assert u.entropy == pytest.approx(want["entropy_sum"] / n, abs=1e-8)
        assert u.normalized_log_best == pytest.approx(want["log_best"] / n, abs=1e-8)
        assert u.value("mnlp") == u.normalized_log_best == -u.rank_key("mnlp")


def test_best_path_is_the_crf_decode_path_and_temperature_keeps_it() -> None:
    crf = make_crf(len(BIOES), allowed_transitions(BIOES, "BIOES"))
    emissions, mask = batch(len(BIOES), [5, 3, 1], seed=3)
    decoded, best = crf.decode(emissions, mask)
    for t in (1.0, 3.0):
        crf.temperature = t
        em, start, trans, end = crf._tempered(emissions)
        paths, scores = two_best(em, start, trans, end, mask)
        assert torch.equal(paths[:, 0], decoded)
        assert scores[:, 0].tolist() == pytest.approx((best / t).tolist(), abs=1e-9)


def test_a_sentence_with_one_path_has_margin_one_and_no_second_path() -> None:
    crf = make_crf(1)
    emissions, mask = batch(1, [1, 3])
    for u in sentence_uncertainty(crf, emissions, mask):
        assert u.log_second == -math.inf
        assert u.least_confidence == pytest.approx(0.0, abs=1e-12)
        assert u.margin == pytest.approx(1.0)
        assert u.entropy == pytest.approx(0.0, abs=1e-12)


def test_combine_equals_enumeration_of_independent_parts() -> None:
    """Two sentences taken together (a line of two sentences, a sentence tagged in two pieces): the joint
    distribution is the product, enumerated over every pair of paths."""
    crf = make_crf(3, seed=4)
    emissions, mask = batch(3, [3, 2], seed=5)
    parts = sentence_uncertainty(crf, emissions, mask)
    joint = combine(parts)
    (_, s1), (_, s2) = enumerate_paths(crf, emissions[0], 3), enumerate_paths(crf, emissions[1], 2)
    pairs = (s1[:, None] + s2[None, :]).flatten()
    log_z = torch.logsumexp(pairs, dim=0)
    top = torch.topk(pairs, 2).values - log_z
    assert joint.log_best == pytest.approx(float(top[0]), abs=1e-8)
    assert joint.log_second == pytest.approx(float(top[1]), abs=1e-8)
    assert joint.tokens == 5
    assert joint.entropy_sum == pytest.approx(parts[0].entropy_sum + parts[1].entropy_sum)
    assert combine([]).tokens == 0


def test_every_strategy_ranks_an_unsure_sentence_above_a_sure_one() -> None:
    """Hand-made: a sentence whose emissions leave no doubt and one whose tags are almost a coin toss."""
    crf = CRF(3)
    with torch.no_grad():
        for p in crf.parameters():
            p.zero_()
    sure = torch.tensor([[[9.0, 0.0, 0.0], [0.0, 9.0, 0.0]]])
    unsure = torch.tensor([[[1.0, 0.9, 0.0], [0.0, 1.0, 0.95]]])
    (a,), (b,) = sentence_uncertainty(crf, sure), sentence_uncertainty(crf, unsure)
    for strategy in ("least-confidence", "margin", "entropy", "mnlp"):
        assert b.rank_key(strategy) > a.rank_key(strategy), strategy
    assert b.least_confidence > a.least_confidence
    assert b.margin < a.margin
    assert b.entropy > a.entropy


def test_mnlp_ranks_per_token_where_least_confidence_ranks_per_sentence() -> None:
    """Two sentences as sure of each token: least confidence puts the longer first, MNLP ties them; a short
    sentence with one unsure token goes above a long sure one under MNLP only."""
    short_sure, long_sure = (SentenceUncertainty(-0.1 * n, -math.inf, 0.0, n) for n in (5, 40))
    assert long_sure.rank_key("least-confidence") > short_sure.rank_key("least-confidence")
    assert long_sure.rank_key("mnlp") == pytest.approx(short_sure.rank_key("mnlp"))
    short_unsure = SentenceUncertainty(-1.5, -math.inf, 0.0, 5)
    assert short_unsure.rank_key("mnlp") > long_sure.rank_key("mnlp")
    assert short_unsure.rank_key("least-confidence") < long_sure.rank_key("least-confidence")
    joint = combine([short_unsure, long_sure])  # a line of both: per token over all 45
    assert joint.normalized_log_best == pytest.approx((-1.5 - 4.0) / 45)
    assert SentenceUncertainty(0.0, -math.inf, 0.0, 0).normalized_log_best == 0.0


def test_rank_keys_keep_order_where_probabilities_underflow() -> None:
    """Long sentences whose best paths have probabilities far below float precision still rank by how unsure."""
    long_a = SentenceUncertainty(log_best=-800.0, log_second=-801.0, entropy_sum=0.0, tokens=1)
    long_b = SentenceUncertainty(log_best=-900.0, log_second=-900.5, entropy_sum=0.0, tokens=1)
    assert long_a.least_confidence == long_b.least_confidence == 1.0
    assert long_b.rank_key("least-confidence") > long_a.rank_key("least-confidence")
    assert long_b.rank_key("margin") > long_a.rank_key("margin")
    assert long_b.rank_key("mnlp") > long_a.rank_key("mnlp")
    tie = SentenceUncertainty(log_best=math.log(0.5), log_second=math.log(0.5), entropy_sum=0.0, tokens=1)
    assert tie.rank_key("margin") == math.inf
    with pytest.raises(ValueError, match="unknown strategy 'bald'"):
        tie.rank_key("bald")
