"""Temperature scaling of the tagger's entity scores (Guo et al. 2017), fitted on a gold split.

One number T divides every CRF potential (``CRF.temperature``): the Viterbi path, hence every predicted entity
and the F1, is the same for every T, while the probabilities sharpen (T < 1) or soften (T > 1). T is chosen to
minimise the binary log loss of the predicted entities' scores against their correctness (span and type
equal to a gold entity's), by a bounded 1-D search over log T. The emissions are computed once; each tried T
re-runs only the CRF. ``gold_path_nll`` is the alternative objective (the gold path's negative log-likelihood)
that docs/calibration.md compares it with.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ner_app.tagger.crf.crf import CRF
from ner_app.tagger.crf.readings import Sweep, window_probabilities
from ner_app.tagger.spec import Calibration
from ner_app.text.readings import LatticeBook
from ner_app.text.reliability import correct_entities, expected_calibration_error, log_loss
from ner_app.text.tags import Span, entities
from ner_app.text.vocab import Vocab

LOW, HIGH = 0.05, 20.0  # the searched temperatures: far wider than any fit we have seen (0.3 to 3)
GRID = 13  # log-spaced temperatures tried first (x1.65 apart); the best one's neighbours bracket the search
TOLERANCE = 1e-3  # of the search, in log T (0.1% of T)
OBJECTIVES = ("log_loss", "gold_nll")


def entity_scores(
    crf: CRF,
    emissions: Tensor,
    mask: Tensor,
    spans: Sequence[Sequence[Span]],
    tag_ids: Mapping[str, int],
    scheme: str,
) -> list[list[float]]:
    """The score of each predicted entity (``spans[b]``: row b's entities, from its Viterbi path) under the
    CRF's current temperature: the probability of the entity's reading, what prediction reports
    (``tagger/crf/readings.py``), unrounded. Emissions (B, T, K), mask (B, T); ``scheme`` the training scheme."""
    lengths = mask.sum(dim=1).tolist()
    book = LatticeBook(scheme, tag_ids)
    numbers = [
        [book.add(b, (s, e, kind), n) for kind, s, e in row]
        for b, (row, n) in enumerate(zip(spans, lengths, strict=True))
    ]
    sweep = Sweep.of(crf, emissions, mask)
    p = book.probabilities(lambda table: window_probabilities(sweep, table).tolist())
    return [[p[k] for k in row] for row in numbers]


@dataclass
class CalibrationSet:
    """A gold split as the fit reads it: batches of emissions (float64), masks and Viterbi paths; each row's
    predicted entities; whether each is correct (flat, in order); gold tag ids (B, T) per batch and which rows
    have every gold tag in the tag vocabulary (the others are left out of ``gold_path_nll``)."""

    emissions: list[Tensor]
    masks: list[Tensor]
    paths: list[Tensor]
    spans: list[list[list[Span]]]
    correct: list[bool]
    gold_ids: list[Tensor]
    gold_known: list[Tensor]
    tag_ids: dict[str, int] = field(default_factory=dict)  # the tag vocabulary, for the readings
    scheme: str = "BIOES"  # the training scheme

    @property
    def entities(self) -> int:
        return len(self.correct)

    @property
    def sentences(self) -> int:
        return sum(int(m.shape[0]) for m in self.masks)


def calibration_set(
    crf: CRF,
    batches: Iterable[tuple[Tensor, Tensor, Sequence[Sequence[str]]]],
    tags: Vocab,
    scheme: str,
) -> CalibrationSet:
    """Decode each batch (emissions (B, T, K), mask (B, T), gold tags of the training ``scheme`` per row) once
    and label its predicted entities against the gold ones."""
    data = CalibrationSet([], [], [], [], [], [], [], dict(tags.stoi), scheme)
    with torch.no_grad():
        for emissions, mask, gold in batches:
            device = crf.transitions.device
            paths = crf.decode(emissions.detach().to(device), mask.to(device))[0].cpu()  # (B, T): any T
            emissions, mask = emissions.detach().cpu(), mask.cpu()
            lengths = mask.sum(dim=1).tolist()
            ids = torch.zeros(mask.shape, dtype=torch.long)
            known = torch.ones(mask.shape[0], dtype=torch.bool)
            spans = []
            for b, (row, n) in enumerate(zip(paths.tolist(), lengths, strict=True)):
                predicted = entities(tags.decode(row[:n]), scheme)
                data.correct += correct_entities(predicted, entities(gold[b], scheme))
                spans.append(predicted)
                if all(t in tags.stoi for t in gold[b]):
                    ids[b, :n] = torch.tensor([tags.stoi[t] for t in gold[b]])
                else:
                    known[b] = False
            data.emissions.append(emissions.double())  # the fit's probabilities in float64: exact scores
            data.masks.append(mask)
            data.paths.append(paths)
            data.spans.append(spans)
            data.gold_ids.append(ids)
            data.gold_known.append(known)
    return data


@contextmanager
def tempered(crf: CRF, temperature: float) -> Iterator[CRF]:
    """The CRF at ``temperature``, on the CPU where the fit's data is, for the block (a copy when ``crf`` is
    on another device); ``crf`` keeps its own temperature."""
    on_cpu = crf if crf.transitions.device.type == "cpu" else copy.deepcopy(crf).cpu()
    saved = on_cpu.temperature
    on_cpu.temperature = temperature
    try:
        yield on_cpu
    finally:
        on_cpu.temperature = saved


def scores_at(crf: CRF, data: CalibrationSet, temperature: float) -> list[float]:
    """Every predicted entity's score at ``temperature``, flat, in the order of ``data.correct``."""
    out: list[float] = []
    with torch.no_grad(), tempered(crf, temperature) as at_t:
        for emissions, mask, spans in zip(data.emissions, data.masks, data.spans, strict=True):
            out += [
                s
                for row in entity_scores(at_t, emissions, mask, spans, data.tag_ids, data.scheme)
                for s in row
            ]
    return out


def gold_path_nll(crf: CRF, data: CalibrationSet, temperature: float) -> float:
    """Mean negative log-likelihood of the gold tag paths per sentence, every potential divided by T."""
    total, count = 0.0, 0
    with torch.no_grad(), tempered(crf, temperature) as at_t:
        for emissions, mask, ids, known in zip(
            data.emissions, data.masks, data.gold_ids, data.gold_known, strict=True
        ):
            e, start, trans, end = at_t._tempered(emissions)
            gold = at_t._gold_score(e, ids, mask, start, trans, end)  # (B,)
            log_z = torch.logsumexp(at_t._alphas(e, mask, start, trans)[-1] + end, dim=1)  # (B,)
            total -= float((gold - log_z)[known].sum())
            count += int(known.sum())
    return total / max(count, 1)


def minimise_log_t(objective: Callable[[float], float], low: float = LOW, high: float = HIGH) -> float:
    """The temperature in [low, high] with the smallest ``objective``: a log-spaced grid, then a golden-section
    search in log T between the best grid point's neighbours (robust to a flat or bumpy start)."""
    a, b = math.log(low), math.log(high)
    grid = [a + (b - a) * i / (GRID - 1) for i in range(GRID)]
    values = [objective(math.exp(u)) for u in grid]
    best = min(range(GRID), key=values.__getitem__)
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, GRID - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = objective(math.exp(x1)), objective(math.exp(x2))
    while hi - lo > TOLERANCE:
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - ratio * (hi - lo)
            f1 = objective(math.exp(x1))
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + ratio * (hi - lo)
            f2 = objective(math.exp(x2))
    u, f = (x1, f1) if f1 <= f2 else (x2, f2)
    if values[best] < f:  # the bracket's ends are grid points; the search keeps the best value it saw
        u = grid[best]
    return math.exp(u)


@dataclass(frozen=True)
class Fit:
    """A fitted temperature and the entity ECE and log loss before (T = 1) and after, on the fitted data."""

    temperature: float
    objective: str
    entities: int
    ece_before: float
    ece_after: float
    log_loss_before: float
    log_loss_after: float
    seconds: float


def fit_temperature(crf: CRF, data: CalibrationSet, objective: str = "log_loss") -> Fit:
    """The temperature minimising ``objective`` (``log_loss`` of the entity scores against correctness, or
    ``gold_nll``) on ``data``; 1.0 when every predicted entity is right, or every one wrong. The CRF's own
    temperature is left as it was."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, found {objective!r}")
    if data.entities == 0:
        raise ValueError("no predicted entities to calibrate on")
    started = time.perf_counter()
    if all(data.correct) or not any(data.correct):
        # Every entity right (or every one wrong): the log loss falls all the way to a bound of the search
        # (T -> 0.05, scores pushed to exactly 1): no evidence for a temperature, so the scores stay as they are.
        temperature = 1.0
    elif objective == "log_loss":
        temperature = minimise_log_t(lambda t: log_loss(scores_at(crf, data, t), data.correct))
    else:
        temperature = minimise_log_t(lambda t: gold_path_nll(crf, data, t))
    seconds = time.perf_counter() - started
    before, after = scores_at(crf, data, 1.0), scores_at(crf, data, temperature)
    return Fit(
        temperature=temperature,
        objective=objective,
        entities=data.entities,
        ece_before=expected_calibration_error(before, data.correct),
        ece_after=expected_calibration_error(after, data.correct),
        log_loss_before=log_loss(before, data.correct),
        log_loss_after=log_loss(after, data.correct),
        seconds=seconds,
    )


def calibration_record(fit: Fit, fitted_on: str) -> Calibration:
    """The record an export keeps of ``fit`` (``fitted_on``: the file's name, or the run's split)."""
    return Calibration(
        temperature=fit.temperature,
        fitted_on=fitted_on,
        entities=fit.entities,
        ece_before=fit.ece_before,
        ece_after=fit.ece_after,
        log_loss_before=fit.log_loss_before,
        log_loss_after=fit.log_loss_after,
    )
