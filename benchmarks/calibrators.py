"""Candidate entity-score calibrators for ``benchmarks/calibration_features.py``, each a few parameters fitted by
minimising the entity log loss: one temperature, a temperature per entity type, and a logistic (Platt) map on
logit(score at the fitted temperature) plus features known at prediction time.

Every candidate reads a table of scores (G, N): each entity's score at each temperature of a log-spaced grid
(the CRF recomputed per temperature), so that temperatures are chosen on the grid. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

Features = dict[str, np.ndarray]  # per entity: "type" (str) and numeric columns (N,)
CLIP = 1e-9  # logit of a score of exactly 0 or 1: ±20.7


def log_loss(p: np.ndarray, correct: np.ndarray) -> float:
    q = np.clip(p, 1e-12, 1 - 1e-12)
    return float(-np.mean(correct * np.log(q) + (1 - correct) * np.log1p(-q)))


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, CLIP, 1 - CLIP)
    return np.log(q) - np.log1p(-q)


def best_temperature(scores: np.ndarray, correct: np.ndarray) -> int:
    """The grid index whose scores (G, N) have the smallest log loss."""
    return int(np.argmin([log_loss(row, correct) for row in scores]))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> np.ndarray:
    """Weights (D + 1,) of a logistic regression on standardised columns x (N, D) plus a bias, by Newton steps
    (a small ridge keeps it defined when a column separates the classes, or every entity is right)."""
    x1 = np.hstack([x, np.ones((len(x), 1))])
    ridge = np.r_[np.full(x.shape[1], l2), 1e-6]
    w = np.zeros(x1.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(x1 @ w, -40, 40)))
        grad = x1.T @ (p - y) / len(y) + ridge * w
        hess = (x1 * (p * (1 - p))[:, None]).T @ x1 / len(y) + np.diag(ridge)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w


class Calibrator:
    """A candidate: ``fit`` on dev entities, ``predict`` scores in [0, 1] for others."""

    name = ""

    def fit(self, scores: np.ndarray, correct: np.ndarray, feats: Features) -> Calibrator:
        raise NotImplementedError

    def predict(self, scores: np.ndarray, feats: Features) -> np.ndarray:
        raise NotImplementedError


class Temperature(Calibrator):
    """(a) One temperature for every entity: the shipped calibration."""

    name = "a. temperature"

    def fit(self, scores: np.ndarray, correct: np.ndarray, feats: Features) -> Calibrator:
        self.index = best_temperature(scores, correct)
        return self

    def predict(self, scores: np.ndarray, feats: Features) -> np.ndarray:
        return scores[self.index]


class TypeTemperature(Calibrator):
    """(b) A temperature per entity type (the entity's own type picks it; a type unseen in the fit gets the
    overall temperature)."""

    name = "b. temperature per type"

    def fit(self, scores: np.ndarray, correct: np.ndarray, feats: Features) -> Calibrator:
        self.overall = best_temperature(scores, correct)
        types = feats["type"]
        self.index = {t: best_temperature(scores[:, types == t], correct[types == t]) for t in set(types)}
        return self

    def predict(self, scores: np.ndarray, feats: Features) -> np.ndarray:
        types = feats["type"]
        rows = np.array([self.index.get(t, self.overall) for t in types])
        return scores[rows, np.arange(scores.shape[1])]


@dataclass
class Platt(Calibrator):
    """(c, d) sigmoid(a logit(score at the fitted temperature) + b + w . features): Platt scaling made aware of
    covariates, so that a shift in them (more unseen words) moves the scores as it moved correctness on dev.
    ``columns``: numeric feature names, and ``type`` for one indicator per entity type."""

    name: str
    columns: Sequence[str] = ()
    types: list[str] = field(default_factory=list)

    def design(self, scores: np.ndarray, feats: Features) -> np.ndarray:
        cols = [logit(scores[self.index])]
        for c in self.columns:
            if c == "type":
                cols += [(feats["type"] == t).astype(float) for t in self.types[1:]]
            elif c == "sentence_logit":
                cols.append(sentence_mean(cols[0], feats["row"]))
            else:
                cols.append(feats[c].astype(float))
        return np.stack(cols, axis=1)

    def fit(self, scores: np.ndarray, correct: np.ndarray, feats: Features) -> Calibrator:
        self.index = best_temperature(scores, correct)
        self.types = sorted(set(feats["type"]))
        x = self.design(scores, feats)
        self.mean, self.std = x.mean(axis=0), x.std(axis=0) + 1e-12
        self.w = fit_logistic((x - self.mean) / self.std, correct)
        return self

    def predict(self, scores: np.ndarray, feats: Features) -> np.ndarray:
        x = (self.design(scores, feats) - self.mean) / self.std
        return 1 / (1 + np.exp(-(x @ self.w[:-1] + self.w[-1])))

    def raw_weights(self) -> dict[str, float]:
        """The weights on the unstandardised columns (logit, features..., bias)."""
        w = self.w[:-1] / self.std
        names = ["logit"] + [
            n for c in self.columns for n in ([f"type={t}" for t in self.types[1:]] if c == "type" else [c])
        ]
        out = dict(zip(names, w.tolist(), strict=True))
        out["bias"] = float(self.w[-1] - np.sum(w * self.mean))
        return out


def sentence_mean(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each entity's mean of ``values`` over the predicted entities of its sentence (itself included): how sure
    the tagger is of the sentence as a whole."""
    _, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    return (np.bincount(inverse, weights=values) / counts)[inverse]


UNSEEN = ("unseen_entity", "unseen_context")


def candidates(lexicon: bool) -> list[Calibrator]:
    """The compared calibrators; ``lexicon``: also those that read the training-entity lexicon."""
    out: list[Calibrator] = [
        Temperature(),
        TypeTemperature(),
        Platt("c0. Platt on logit(score)"),
        Platt("c1. Platt + unseen share of the entity", ("unseen_entity",)),
        Platt("c2. Platt + unseen shares of entity and context", UNSEEN),
        Platt("c3. c2 + any unseen token", (*UNSEEN, "any_unseen")),
        Platt("c4. c2 + entity type", (*UNSEEN, "type")),
        Platt("d1. c4 + length, capitals, sentence length", (*UNSEEN, "type", *SHAPE)),
    ]
    if lexicon:
        out.append(Platt("e1. c2 + training-entity lexicon", (*UNSEEN, "lexicon_same", "lexicon_other")))
        out.append(
            Platt(
                "f2. e1 + the sentence's mean logit",
                (*UNSEEN, "lexicon_same", "lexicon_other", "sentence_logit"),
            )
        )
    out.append(Platt("f1. c2 + the sentence's mean logit", (*UNSEEN, "sentence_logit")))
    return out


SHAPE = ("log_length", "all_caps", "sentence_caps", "log_sentence_length")
