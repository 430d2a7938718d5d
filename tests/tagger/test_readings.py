"""Entity readings: their probabilities against brute-force enumeration of every tag path of tiny random CRFs
(transition constraints on, BIOES, BIO and IOB1, a temperature), the alternatives and flagged tokens built on
them, the constrained partition function, and numpy (ONNX) against torch."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from ner_app.onnx import crf as onnx_crf
from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF
from ner_app.tagger.crf.readings import allowed_mask, lattice_probabilities, read_sentences
from ner_app.text.readings import (
    WINDOW,
    LatticeBook,
    Lattices,
    ReadingOptions,
    add_up,
    alternative_readings,
    covering_readings,
)
from ner_app.text.tags import entities, scheme_tags

LENGTHS = [4, 3, 1]
TYPES = ["X", "Y"]


def make(scheme: str, seed: int, temperature: float) -> tuple[CRF, list[str], torch.Tensor, torch.Tensor]:
    """A random constrained CRF over two entity types, emissions (B, T, K) and a mask (B, T)."""
    tags = scheme_tags(scheme, TYPES)
    torch.manual_seed(seed)
    crf = CRF(len(tags), allowed_transitions(tags, scheme))
    with torch.no_grad():
        for p in crf.parameters():
            p.uniform_(-1.5, 1.5)
    crf.temperature = temperature
    emissions = torch.randn(len(LENGTHS), max(LENGTHS), len(tags)) * 2
    mask = torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]
    return crf, tags, emissions, mask


def path_distribution(
    crf: CRF, tags: list[str], emissions: torch.Tensor, n: int
) -> list[tuple[list[str], float]]:
    """Every allowed tag path of one sentence of ``n`` tokens and its probability, by enumeration (float64; the
    CRF tempers its float32 scores in float32, hence the 1e-6 tolerances)."""
    start, trans, end = ((p.detach().double() / crf.temperature).tolist() for p in crf._scores())
    em = (emissions[:n].double() / crf.temperature).tolist()
    assert crf.start_allowed is not None and crf.trans_allowed is not None and crf.end_allowed is not None
    ok_start, ok_trans, ok_end = (
        crf.start_allowed.tolist(),
        crf.trans_allowed.tolist(),
        crf.end_allowed.tolist(),
    )
    paths, scores = [], []
    for path in itertools.product(range(len(tags)), repeat=n):
        if not (
            ok_start[path[0]]
            and ok_end[path[-1]]
            and all(ok_trans[a][b] for a, b in itertools.pairwise(path))
        ):
            continue
        score = start[path[0]] + end[path[-1]] + sum(em[t][y] for t, y in enumerate(path))
        score += sum(trans[a][b] for a, b in itertools.pairwise(path))
        paths.append([tags[y] for y in path])
        scores.append(score)
    top = max(scores)
    log_z = top + math.log(sum(math.exp(s - top) for s in scores))
    return [(p, math.exp(s - log_z)) for p, s in zip(paths, scores, strict=True)]


def brute(distribution: list[tuple[list[str], float]], scheme: str, reading: tuple[int, int, str]) -> float:
    """Probability that a path holds exactly ``reading``: the summed probability of the paths that do."""
    start, end, kind = reading
    return sum(p for path, p in distribution if (kind, start, end) in entities(path, scheme))


def every_reading(n: int) -> list[tuple[int, int, str]]:
    return [(s, e, k) for s in range(n) for e in range(s + 1, n + 1) for k in TYPES]


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
@pytest.mark.parametrize(("seed", "temperature"), [(0, 1.0), (1, 1.7), (2, 0.6)])
def test_reading_probabilities_equal_enumeration(scheme, seed, temperature):
    crf, tags, emissions, mask = make(scheme, seed, temperature)
    ids = {t: i for i, t in enumerate(tags)}
    table, asked = Lattices(), []
    for row, n in enumerate(LENGTHS):
        for reading in every_reading(n):
            asked.append((row, reading))
            table.add(row, reading, n, scheme, ids)
    with torch.no_grad():
        got = add_up(table, lattice_probabilities(crf, emissions, mask, table).tolist())
    dists = [path_distribution(crf, tags, emissions[row], n) for row, n in enumerate(LENGTHS)]
    for (row, reading), p in zip(asked, got, strict=True):
        want = brute(dists[row], scheme, reading)
        assert p == pytest.approx(want, abs=1e-6), (scheme, row, reading)
    # the readings of a sentence's entity spans: summed over every reading, the expected number of entities
    for row, dist in enumerate(dists):
        expected = sum(p * len(entities(path, scheme)) for path, p in dist)
        total = sum(p for (r, _), p in zip(asked, got, strict=True) if r == row)
        assert total == pytest.approx(expected, abs=1e-6)


def test_temperature_changes_probabilities_not_paths():
    crf, tags, emissions, mask = make("BIOES", 3, 1.0)
    with torch.no_grad():
        cold = read_sentences(crf, emissions, mask, tags, "BIOES", ReadingOptions())
        crf.temperature = 2.5
        warm = read_sentences(crf, emissions, mask, tags, "BIOES", ReadingOptions())
    assert [s.tags for s in cold] == [s.tags for s in warm]
    scores = [
        (c, w) for a, b in zip(cold, warm, strict=True) for c, w in zip(a.entities, b.entities, strict=True)
    ]
    assert scores and any(abs(c[1] - w[1]) > 1e-3 for c, w in scores)


@pytest.mark.parametrize("scheme", ["BIOES", "BIO"])
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_alternatives_and_flags_equal_enumeration(scheme, seed):
    crf, tags, emissions, mask = make(scheme, seed, 1.3)
    options = ReadingOptions(alternatives=3, flag_missed=1.0)  # every O token flagged
    with torch.no_grad():
        found = read_sentences(crf, emissions, mask, tags, scheme, options)
        marginals = crf.marginals(emissions, mask)
    for row, (n, sentence) in enumerate(zip(LENGTHS, found, strict=True)):
        dist = path_distribution(crf, tags, emissions[row], n)
        spans = entities(sentence.tags, scheme)
        assert [r for r, _ in sentence.entities] == [(s, e, k) for k, s, e in spans]
        assert sentence.alternatives is not None and sentence.missed is not None
        for (reading, p), alternatives in zip(sentence.entities, sentence.alternatives, strict=True):
            assert p == pytest.approx(brute(dist, scheme, reading), abs=1e-6)
            ranked = sorted(
                ((brute(dist, scheme, a), a) for a in alternative_readings(reading, n, TYPES)),
                key=lambda x: (-x[0], x[1]),
            )
            want = [(a, q) for q, a in ranked if q > 0][:3]
            assert [a for a, _ in alternatives] == [a for a, _ in want]
            for (_, q), (_, w) in zip(alternatives, want, strict=True):
                assert q == pytest.approx(w, abs=1e-6)
            for (s, e, kind), _ in alternatives:  # overlapping, boundaries within the window, not itself
                assert s < reading[1] and e > reading[0] and (s, e, kind) != reading
                assert abs(s - reading[0]) <= WINDOW and abs(e - reading[1]) <= WINDOW
        o_tokens = [i for i, t in enumerate(sentence.tags) if t == "O"]
        assert [m.token for m in sentence.missed] == o_tokens
        for m in sentence.missed:
            assert m.outside == pytest.approx(float(marginals[row, m.token, tags.index("O")]), abs=1e-6)
            best = max(brute(dist, scheme, c) for c in covering_readings(m.token, n, TYPES))
            assert m.reading[1] == pytest.approx(best, abs=1e-6)
            assert m.reading[0][0] <= m.token < m.reading[0][1]


def test_scores_lie_in_unit_interval_on_large_scores():
    """Large emissions over long sentences: float32 would round a sure reading past 1."""
    scheme = "BIOES"
    tags = scheme_tags(scheme, TYPES)
    crf = CRF(len(tags), allowed_transitions(tags, scheme))
    gen = torch.Generator().manual_seed(0)
    emissions = torch.randn(3, 120, len(tags), generator=gen) * 30
    mask = torch.ones(3, 120, dtype=torch.bool)
    with torch.no_grad():
        found = read_sentences(crf, emissions, mask, tags, scheme, ReadingOptions())
    scores = [p for s in found for _, p in s.entities]
    assert scores and all(0.0 <= p <= 1.0 for p in scores)


def test_numpy_lattices_equal_torch():
    crf, tags, emissions, mask = make("BIOES", 7, 1.4)
    ids = {t: i for i, t in enumerate(tags)}
    table = Lattices()
    for row, n in enumerate(LENGTHS):
        for reading in every_reading(n):
            table.add(row, reading, n, "BIOES", ids)
    with torch.no_grad():
        want = lattice_probabilities(crf, emissions, mask, table).numpy()
        start, trans, end = (p.detach().numpy() / crf.temperature for p in crf._scores())
    got = onnx_crf.lattice_probabilities(
        emissions.numpy() / crf.temperature, np.array(LENGTHS), start, trans, end, table
    )
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)  # float32 tempering


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_windowed_lattices_equal_the_constrained_partition(scheme):
    """The readings' few-step window through the forward and backward variables equals
    ``CRF.log_partition`` over each lattice's whole (L, T, K) mask, on sentences longer than the windows."""
    tags = scheme_tags(scheme, TYPES)
    torch.manual_seed(9)
    crf = CRF(len(tags), allowed_transitions(tags, scheme))
    crf.temperature = 1.3
    lengths = [12, 7, 1, 9]
    emissions = torch.randn(len(lengths), 12, len(tags)) * 3
    mask = torch.arange(12)[None, :] < torch.tensor(lengths)[:, None]
    table = Lattices()
    for row, n in enumerate(lengths):
        for reading in every_reading(n):
            table.add(row, reading, n, scheme, {t: i for i, t in enumerate(tags)})
    rows = torch.tensor(table.rows)
    with torch.no_grad():
        got = lattice_probabilities(crf, emissions, mask, table)
        allowed = allowed_mask(table, 12, len(tags), emissions.device)
        em = emissions.double()
        want = torch.exp(crf.log_partition(em[rows], mask[rows], allowed) - crf.log_partition(em, mask)[rows])
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


def test_a_book_of_tables_by_width_equals_one_table():
    """Readings split into tables by window width (so one long reading does not widen every window) get the
    probabilities they get in one table."""
    tags = scheme_tags("BIOES", TYPES)
    torch.manual_seed(10)
    crf = CRF(len(tags), allowed_transitions(tags, "BIOES"))
    lengths = [30, 5]
    emissions = torch.randn(2, 30, len(tags)) * 2
    mask = torch.arange(30)[None, :] < torch.tensor(lengths)[:, None]
    ids = {t: i for i, t in enumerate(tags)}
    asked = [(0, (2, 3, "X")), (0, (0, 30, "Y")), (1, (1, 4, "X")), (0, (10, 25, "X")), (1, (4, 5, "Y"))]
    book, table = LatticeBook("BIOES", ids), Lattices()
    for row, reading in asked:
        book.add(row, reading, lengths[row])
        table.add(row, reading, lengths[row], "BIOES", ids)
    assert len(book.tables) > 1
    with torch.no_grad():
        got = book.probabilities(lambda t: lattice_probabilities(crf, emissions, mask, t).tolist())
        want = add_up(table, lattice_probabilities(crf, emissions, mask, table).tolist())
    assert got == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_log_partition_constrained_and_errors():
    crf, tags, emissions, mask = make("BIO", 8, 1.0)
    everything = torch.ones_like(emissions, dtype=torch.bool)
    with torch.no_grad():
        free = crf.log_partition(emissions, mask)
        assert torch.allclose(crf.log_partition(emissions, mask, everything), free)
        nothing = everything.clone()
        nothing[:, 0] = False  # no tag allowed at the first position: no path
        assert bool((crf.log_partition(emissions, mask, nothing) < -1e3).all())
    with pytest.raises(ValueError, match="allowed must be a bool tensor"):
        crf.log_partition(emissions, mask, everything[:, :2])


def test_reading_options_refuse_bad_values():
    for bad in (-0.1, 1.5, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match="min_score: expected a probability in"):
            ReadingOptions(min_score=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="flag_missed: expected a probability in"):
            ReadingOptions(flag_missed=bad)  # type: ignore[arg-type]
    for bad_k in (-1, 1.5, "2", True):
        with pytest.raises(ValueError, match="alternatives: expected an integer >= 0"):
            ReadingOptions(alternatives=bad_k)  # type: ignore[arg-type]
