"""Can a calibrator that reads features known at prediction time close the dev/test calibration gap that one
temperature leaves? Candidates (``benchmarks/calibrators.py``) are fitted on dev only and compared by
cross-validation on dev; only the temperature and the chosen one (``--chosen``) are then measured on test.

    python -m benchmarks.calibration_features  # long job: tags CoNLL-2003 dev and test, about 2 minutes
    python -m benchmarks.calibration_features --dev tests/data/tiny_conll/valid.txt --test tests/data/tiny_conll/test.txt --train tests/data/tiny_conll/train.txt --folds 2

Features per predicted entity: the share of its tokens, and of the sentence's other tokens, whose word was not
in the training vocabulary (the export's trained word rows: ids below ``num_trainable_words``; frozen GloVe
rows and unknown words count as unseen), whether any token is unseen, its type, length, capitals, the
sentence's length and capitals; with ``--train``, whether its text was a training entity of its predicted type
or of another type. Three cross-validations on dev: folds of consecutive sentences, folds of whole
documents, and a shift split (fit on the 60% of documents with the fewest unseen words, measure on the rest).
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from benchmarks.calibrators import Calibrator, Features, Platt, candidates, log_loss
from benchmarks.common import SHARED, print_table
from ner_app.predict.predictor import Predictor
from ner_app.tagger.crf.calibration import CalibrationSet, calibration_set, scores_at
from ner_app.text.conll import read_conll
from ner_app.text.pieces import split_pieces
from ner_app.text.reliability import expected_calibration_error
from ner_app.text.tags import convert, detect_scheme, entities

GRID = np.exp(np.linspace(np.log(0.5), np.log(8.0), 41))  # temperatures, 7% apart
SHIFT_SHARE = 0.6  # of dev's documents, the most familiar ones, fitted on in the shift split


def ece(p: np.ndarray, correct: np.ndarray) -> float:
    return expected_calibration_error(p.tolist(), correct.astype(bool).tolist())


def tag_file(predictor: Predictor, path: Path) -> tuple[CalibrationSet, list[list[str]], list[int]]:
    """The calibration set of a gold file, and each row's tokens and document, in the set's order."""
    sentences = read_conll(path)
    spec = predictor.spec
    source = detect_scheme([s.tags for s in sentences])
    pieces = split_pieces([s.tokens for s in sentences])
    gold = split_pieces([convert(s.tags, source, spec.scheme) for s in sentences])
    docs = [sentences[i].doc for i, _ in pieces]
    tokens: list[list[str]] = []
    row_docs: list[int] = []

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor, Sequence[Sequence[str]]]]:
        for group, emissions, mask in predictor.emission_batches([t for _, t in pieces], docs):
            tokens.extend(pieces[p][1] for p in group)
            row_docs.extend(docs[p] for p in group)
            yield emissions, mask, [gold[p][1] for p in group]

    return calibration_set(predictor.tagger.crf, batches(), spec.tag_vocab, spec.scheme), tokens, row_docs


def training_lexicon(path: Path) -> dict[str, Counter[str]]:
    """Each training entity's lower-cased text and how often each type labelled it."""
    sentences = read_conll(path)
    source = detect_scheme([s.tags for s in sentences])
    lexicon: dict[str, Counter[str]] = defaultdict(Counter)
    for s in sentences:
        for kind, a, b in entities(convert(s.tags, source, "BIOES"), "BIOES"):
            lexicon[" ".join(s.tokens[a:b]).lower()][kind] += 1
    return lexicon


def features(
    data: CalibrationSet,
    tokens: list[list[str]],
    docs: list[int],
    trained: set[str],
    lexicon: dict[str, Counter[str]] | None,
) -> tuple[Features, np.ndarray]:
    """The features of every predicted entity, in the order of ``data.correct``, and each one's document."""
    rows: dict[str, list[object]] = defaultdict(list)
    entity_docs = []
    spans = [row for batch in data.spans for row in batch]
    for index, (words, row, doc) in enumerate(zip(tokens, spans, docs, strict=True)):
        unseen = [w.lower() not in trained for w in words]
        letters = [w.isupper() for w in words if w.isalpha()]
        for kind, s, e in row:
            context = unseen[:s] + unseen[e:]
            seen_as = lexicon.get(" ".join(words[s:e]).lower()) if lexicon is not None else None
            top = seen_as.most_common(1)[0][0] if seen_as else None
            for name, value in (
                ("type", kind),
                ("unseen_entity", float(np.mean(unseen[s:e]))),
                ("unseen_context", float(np.mean(context)) if context else 0.0),
                ("any_unseen", float(any(unseen[s:e]))),
                ("log_length", float(np.log(e - s))),
                ("all_caps", float(all(w.isupper() for w in words[s:e] if w.isalpha()))),
                ("sentence_caps", float(np.mean(letters)) if letters else 0.0),
                ("log_sentence_length", float(np.log(len(words)))),
                ("lexicon_same", float(top == kind)),
                ("lexicon_other", float(top is not None and top != kind)),
                ("row", float(index)),
            ):
                rows[name].append(value)
            entity_docs.append(doc)
    return {k: np.array(v) for k, v in rows.items()}, np.array(entity_docs)


def subset(feats: Features, keep: np.ndarray) -> Features:
    return {k: v[keep] for k, v in feats.items()}


def out_of_fold(
    model: Calibrator, scores: np.ndarray, correct: np.ndarray, feats: Features, fold: np.ndarray
) -> tuple[np.ndarray, float]:
    """Every entity's score from the model fitted on the other folds, and the spread (standard deviation) of
    the ECE from fold to fold."""
    out, each = np.zeros(len(correct)), []
    for k in np.unique(fold):
        fit, held = fold != k, fold == k
        model.fit(scores[:, fit], correct[fit], subset(feats, fit))
        out[held] = model.predict(scores[:, held], subset(feats, held))
        each.append(ece(out[held], correct[held]))
    return out, float(np.std(each))


def describe(name: str, correct: np.ndarray, feats: Features, lexicon: bool) -> list[str]:
    none = feats["any_unseen"] == 0
    cells = [
        name,
        f"{len(correct):,}",
        f"{correct.mean():.4f}",
        f"{feats['unseen_entity'].mean():.3f}",
        f"{feats['unseen_context'].mean():.3f}",
        f"{correct[none].mean():.4f}",
        f"{correct[~none].mean():.4f}",
    ]
    if lexicon:
        cells.append(f"{1 - feats['lexicon_same'].mean() - feats['lexicon_other'].mean():.3f}")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    conll = SHARED / "data" / "conll2003"
    parser.add_argument("--model", type=Path, default=Path("data/models/conll2003"), help="an export folder")
    parser.add_argument("--dev", type=Path, default=conll / "valid.txt", help="fit and cross-validate on it")
    parser.add_argument("--test", type=Path, default=conll / "test.txt", help="measured once, at the end")
    parser.add_argument("--train", type=Path, default=conll / "train.txt", help="for the lexicon features")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--chosen",
        default="c2",
        help="the candidate measured on test (its name's prefix), or auto: the lowest log loss over document folds",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    predictor = Predictor.from_export(args.model)
    spec = predictor.spec
    trained = set(spec.word_vocab.itos[: spec.num_trainable_words])
    lexicon = training_lexicon(args.train) if args.train.is_file() else None
    crf = predictor.tagger.crf
    split = {}
    for name, path in (("dev", args.dev), ("test", args.test)):
        data, tokens, docs = tag_file(predictor, path)
        feats, entity_docs = features(data, tokens, docs, trained, lexicon)
        table = np.array([scores_at(crf, data, float(t)) for t in GRID])  # (G, N)
        split[name] = (table, np.array(data.correct, dtype=float), feats, entity_docs)

    print(f"\n{args.model}: the predicted entities of dev ({args.dev}) and test ({args.test})\n")
    header = ["file", "entities", "share right", "unseen share (entity)", "unseen share (context)"]
    header += ["share right, no unseen token", "share right, some unseen"]
    print_table(
        header + (["not a training entity"] if lexicon else []),
        [describe(n, split[n][1], split[n][2], lexicon is not None) for n in ("dev", "test")],
    )

    scores, correct, feats, docs = split["dev"]
    sentence_fold = np.minimum(np.arange(len(correct)) * args.folds // max(len(correct), 1), args.folds - 1)
    names = sorted(set(docs.tolist()))
    doc_fold = np.array([names.index(d) * args.folds // len(names) for d in docs])
    rate = {d: feats["unseen_context"][docs == d].mean() for d in names}
    familiar = np.isin(docs, sorted(names, key=rate.__getitem__)[: max(1, int(SHIFT_SHARE * len(names)))])
    print(
        f"\nDev cross-validation ({args.folds} folds; the shift split fits on {familiar.sum():,} entities of "
        f"familiar documents and measures {(~familiar).sum():,}):\n"
    )
    rows, models = [], candidates(lexicon is not None)
    document_loss = {}
    for model in models:
        cells = [model.name]
        for fold in (sentence_fold, doc_fold):
            p, spread = out_of_fold(model, scores, correct, feats, fold)
            cells += [f"{ece(p, correct):.4f} ± {spread:.4f}", f"{log_loss(p, correct):.4f}"]
        document_loss[model.name] = log_loss(p, correct)
        model.fit(scores[:, familiar], correct[familiar], subset(feats, familiar))
        p = model.predict(scores[:, ~familiar], subset(feats, ~familiar))
        cells += [f"{ece(p, correct[~familiar]):.4f}", f"{log_loss(p, correct[~familiar]):.4f}"]
        rows.append(cells)
    header = [
        "candidate",
        "ECE ± fold sd",
        "log loss",
        "ECE (documents) ± fold sd",
        "log loss (documents)",
        "ECE (shift)",
    ]
    print_table([*header, "log loss (shift)"], rows)

    if args.chosen == "auto":  # the rule: the lowest log loss over folds of whole documents
        chosen = min(models, key=lambda m: document_loss[m.name])
        print(f"\nChosen by the lowest log loss over document folds: {chosen.name}")
    else:
        chosen = [m for m in models if m.name.startswith(args.chosen)][0]
    test_scores, test_correct, test_feats, _ = split["test"]
    print("\nFitted on all of dev; test measured for the temperature and the chosen candidate only:\n")
    rows = []
    for model in (models[0], chosen):
        model.fit(scores, correct, feats)
        dev_p, test_p = model.predict(scores, feats), model.predict(test_scores, test_feats)
        outside = int(np.sum((test_p < 0) | (test_p > 1)) + np.sum((dev_p < 0) | (dev_p > 1)))
        cells = [model.name, f"{GRID[model.index]:.4f}"]  # type: ignore[attr-defined]
        for p, c in ((dev_p, correct), (test_p, test_correct)):
            cells += [f"{ece(p, c):.4f}", f"{log_loss(p, c):.4f}"]
        rows.append([*cells, str(outside)])
        if isinstance(model, Platt):
            weights = ", ".join(f"{k} {v:+.4f}" for k, v in model.raw_weights().items())
            print(f"{model.name}: {weights}\n")
    header = ["calibrator", "temperature", "dev ECE", "dev log loss", "test ECE", "test log loss"]
    print_table([*header, "scores outside [0, 1]"], rows)


if __name__ == "__main__":
    main()
