"""Temperature scaling: tempered marginals against enumeration, the fit recovering a known temperature on data
drawn from a CRF, the Viterbi path (hence F1) unchanged, the record's bounds."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ner_app.tagger.crf.calibration import (
    calibration_set,
    entity_scores,
    fit_temperature,
    gold_path_nll,
    minimise_log_t,
    scores_at,
)
from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF
from ner_app.tagger.crf.readings import read_sentences
from ner_app.tagger.spec import SpecError, TaggerSpec
from ner_app.text.readings import ReadingOptions
from ner_app.text.tags import entities
from ner_app.text.vocab import Vocab

BIOES = ["O", "B-A", "E-A", "I-A", "S-A", "S-B"]


def make_crf(tags: list[str] | int, seed: int, scale: float = 1.0) -> CRF:
    torch.manual_seed(seed)
    if isinstance(tags, int):
        crf = CRF(tags)
    else:
        crf = CRF(len(tags), allowed_transitions(tags, "BIOES"))
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(0, scale)
    return crf


@torch.no_grad()
def brute_marginals(crf: CRF, emissions: torch.Tensor, n: int, t: float) -> torch.Tensor:
    """(n, K) marginals by enumerating every path, each potential (allowed ones; forbidden: -1e4) divided by t."""
    start, trans, end = (x.double() for x in crf._scores())
    e = emissions.double()
    k = crf.num_tags
    probs = torch.zeros(n, k, dtype=torch.float64)
    weights = {}
    for path in itertools.product(range(k), repeat=n):
        score = start[path[0]] + end[path[-1]] + sum(e[i, y] for i, y in enumerate(path))
        score = score + sum(trans[a, b] for a, b in itertools.pairwise(path))
        weights[path] = score / t
    log_z = torch.logsumexp(torch.stack(list(weights.values())), 0)
    for path, w in weights.items():
        p = torch.exp(w - log_z)
        for i, y in enumerate(path):
            probs[i, y] += p
    return probs


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("constrained", [False, True])
def test_tempered_marginals_equal_enumeration(temperature: float, constrained: bool) -> None:
    k = len(BIOES) if constrained else 3
    crf = make_crf(BIOES if constrained else 3, seed=3, scale=2.0)
    lengths = [4, 2, 1]
    emissions = torch.randn(3, 4, k, generator=torch.Generator().manual_seed(5)) * 2
    mask = torch.arange(4)[None, :] < torch.tensor(lengths)[:, None]
    crf.temperature = temperature
    with torch.no_grad():
        got = crf.marginals(emissions.double(), mask)
    for b, n in enumerate(lengths):
        want = brute_marginals(crf, emissions[b], n, temperature)
        torch.testing.assert_close(got[b, :n], want, atol=1e-6, rtol=1e-5)  # fp32 parameters
        assert float(got[b, n:].detach().abs().sum()) == 0.0


def test_viterbi_path_does_not_depend_on_temperature() -> None:
    crf = make_crf(BIOES, seed=4, scale=1.5)
    emissions = torch.randn(8, 9, len(BIOES), generator=torch.Generator().manual_seed(1)) * 3
    base = crf.decode(emissions)[0]
    for t in (0.05, 0.5, 4.0, 20.0):
        crf.temperature = t
        assert torch.equal(crf.decode(emissions)[0], base)
        # and Viterbi on the tempered potentials (what a tempered argmax would be) is the same path too
        _, start, trans, end = crf._tempered(emissions)
        scaled = CRF(len(BIOES))
        with torch.no_grad():
            scaled.start_transitions.copy_(start)
            scaled.transitions.copy_(trans)
            scaled.end_transitions.copy_(end)
        assert torch.equal(scaled.decode(emissions / t)[0], base)


def sample_paths(crf: CRF, emissions: torch.Tensor, t: float, gen: torch.Generator) -> torch.Tensor:
    """Exact samples (B, T) of the CRF at temperature t (full-length rows): forward filtering, backward sampling."""
    crf.temperature = t
    e, start, trans, end = crf._tempered(emissions.double())
    crf.temperature = 1.0
    mask = torch.ones(e.shape[:2], dtype=torch.bool)
    alphas = crf._alphas(e, mask, start, trans)  # T x (B, K)
    batch, steps, _ = e.shape
    paths = torch.empty(batch, steps, dtype=torch.long)
    weights = torch.softmax(alphas[-1] + end, dim=1)
    paths[:, -1] = torch.multinomial(weights, 1, generator=gen)[:, 0]
    for i in range(steps - 2, -1, -1):
        weights = torch.softmax(alphas[i] + trans[:, paths[:, i + 1]].T, dim=1)
        paths[:, i] = torch.multinomial(weights, 1, generator=gen)[:, 0]
    return paths


def synthetic(tags: list[str], true_t: float, seed: int, batches: int = 4, size: int = 250, steps: int = 6):
    """Emissions from a random CRF and gold paths drawn from that CRF at ``true_t``."""
    crf = make_crf(tags, seed=seed, scale=0.5)
    gen = torch.Generator().manual_seed(seed)
    vocab = Vocab(tags, specials=False)
    out = []
    for _ in range(batches):
        emissions = torch.randn(size, steps, len(tags), generator=gen) * 2.0
        gold = sample_paths(crf, emissions, true_t, gen)
        mask = torch.ones(size, steps, dtype=torch.bool)
        out.append((emissions.float(), mask, [vocab.decode(row) for row in gold.tolist()]))
    return crf, calibration_set(crf, out, vocab, "BIOES")


@pytest.mark.parametrize("true_t", [0.5, 2.0])
def test_the_entity_log_loss_fit_recovers_the_temperature_the_data_came_from(true_t: float) -> None:
    # Single-token entities only (O, S-A, S-B): an entity's score is the marginal of its tag, which at the
    # true temperature is exactly the probability that it is correct, so log loss is minimal there.
    crf, data = synthetic(["O", "S-A", "S-B"], true_t, seed=11)
    fit = fit_temperature(crf, data, "log_loss")
    assert abs(math.log(fit.temperature / true_t)) < 0.15, fit
    assert fit.log_loss_after <= fit.log_loss_before and crf.temperature == 1.0


@pytest.mark.parametrize("true_t", [0.5, 2.0])
def test_the_gold_nll_fit_recovers_the_temperature_with_multi_token_entities(true_t: float) -> None:
    crf, data = synthetic(BIOES, true_t, seed=7)
    fit = fit_temperature(crf, data, "gold_nll")
    assert abs(math.log(fit.temperature / true_t)) < 0.1, fit
    assert gold_path_nll(crf, data, fit.temperature) <= gold_path_nll(crf, data, 1.0)


def test_entity_scores_are_the_reading_probabilities_prediction_reports_and_in_0_1() -> None:
    crf = make_crf(BIOES, seed=2, scale=1.0)
    emissions = torch.randn(2, 5, len(BIOES), generator=torch.Generator().manual_seed(3)) * 4
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    paths = crf.decode(emissions, mask)[0]
    vocab = Vocab(BIOES, specials=False)
    spans = [entities(vocab.decode(paths[b, :n].tolist()), "BIOES") for b, n in enumerate((5, 3))]
    assert sum(len(s) for s in spans) > 0
    crf.temperature = 1.7
    got = entity_scores(crf, emissions.double(), mask, spans, dict(vocab.stoi), "BIOES")
    read = read_sentences(crf, emissions.double(), mask, vocab.itos, "BIOES", ReadingOptions())
    for b, n in enumerate((5, 3)):
        brute = brute_marginals(crf, emissions[b], n, 1.7)
        assert [(kind, s, e) for (s, e, kind), _ in read[b].entities] == spans[b]
        for (_, s, e), score, (_, want) in zip(spans[b], got[b], read[b].entities, strict=True):
            assert score == pytest.approx(want, abs=1e-12) and 0.0 <= score <= 1.0
            # the whole entity is at most as probable as any one of its tags
            assert score <= min(float(brute[i, paths[b, i]]) for i in range(s, e)) + 1e-6


def test_scores_at_leaves_the_temperature_and_calibration_keeps_every_entity() -> None:
    crf, data = synthetic(BIOES, 1.5, seed=5, batches=2, size=30)
    crf.temperature = 0.8
    scores = scores_at(crf, data, 3.0)
    assert crf.temperature == 0.8 and len(scores) == data.entities == len(data.correct) > 0
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_minimise_log_t_finds_a_known_minimum_and_stays_in_bounds() -> None:
    for target in (0.07, 0.8, 3.3, 15.0):
        found = minimise_log_t(lambda t, target=target: (math.log(t) - math.log(target)) ** 2)
        assert found == pytest.approx(target, rel=2e-3)
    assert minimise_log_t(lambda t: t) == pytest.approx(0.05)  # decreasing to the lower bound: the bound


def test_spec_calibration_round_trips_and_bad_temperatures_are_refused() -> None:
    from ner_app.tagger.spec import Calibration, TaggerSizes

    sizes = TaggerSizes(4, 4, 4, 3, 4, 1, 0.0)
    spec = TaggerSpec.from_training_data(sizes, [["a", "b"]], [["S-A", "O"]], "BIOES", "IOB1")
    assert spec.temperature == 1.0 and "calibration" not in spec.to_json()
    record = Calibration(1.7, "valid.txt", 12, 0.1, 0.01, 0.3, 0.2)
    calibrated = TaggerSpec.from_json({**spec.to_json(), "calibration": record.__dict__})
    assert calibrated.calibration == record and calibrated.temperature == 1.7
    for bad in (0.0, -1.0, 1e9):
        data = {**spec.to_json(), "calibration": {**record.__dict__, "temperature": bad}}
        with pytest.raises(SpecError, match=r"^x: key 'calibration.temperature': expected a number in"):
            TaggerSpec.from_json(data, "x")
    with pytest.raises(SpecError, match=r"key 'calibration.temperature': expected float, found str"):
        TaggerSpec.from_json({**spec.to_json(), "calibration": {**record.__dict__, "temperature": "2"}}, "x")


def test_all_right_or_all_wrong_keeps_the_scores() -> None:
    crf, data = synthetic(BIOES, 1.5, seed=5, batches=1, size=30)
    for value in (True, False):
        data.correct = [value] * data.entities
        fit = fit_temperature(crf, data)
        assert fit.temperature == 1.0 and fit.ece_after == fit.ece_before
