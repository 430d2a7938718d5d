"""What the run report reads from a finished run folder besides ``metrics.json`` (``RunMetrics.read``).

``logs/metrics.csv`` (the per-step log), ``predictions_{dev,test}.conll`` (token, gold, predicted), the
ELMo mix weights from ``export/model.safetensors`` and the model's entity types from ``export/tagger.json``
(or, without an export, both from ``checkpoints/best.ckpt``, loaded without unpickling). Each file is checked as it is read: a missing or malformed one is one ``NerAppError``
naming it (and the line or key).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ner_app.errors import MissingFileError, NerAppError
from ner_app.text.conll import PredictedSentence, decode_text
from ner_app.text.conll import read_predictions as read_conll_predictions
from ner_app.text.tags import entity_types
from ner_app.train.metrics import Mix

Sentence = PredictedSentence  # tokens, gold tags, predicted tags
Curves = tuple[dict[int, float], dict[int, dict[str, float]], dict[int, dict[str, float]]]
LOG_COLUMNS = ("epoch", "step", "val_f1")  # train_token_loss: not in the logs of older versions
_MIX = re.compile(r"(?:tagger\.)?elmo\.scalar_mixes\.(\d+)\.(scalar_parameters|gamma)")
_TRANSFORMER_MIX = re.compile(r"(?:tagger\.)?transformer_mix\.(scalar_parameters|gamma)")


def need(path: Path) -> Path:
    """``path`` if it is a file; a ``MissingFileError`` naming it otherwise."""
    if not path.is_file():
        raise MissingFileError(f"{path}: not found (expected a run folder written by train.py)")
    return path


def _text(path: Path) -> str:
    """The file as UTF-8 text; a ``NerAppError`` naming the line of the first byte that is not UTF-8."""
    return decode_text(path, need(path).read_bytes())


def _log_value(path: Path, line: int, key: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise NerAppError(f"{path}:{line}: {key}: expected a number, found {value[:40]!r}") from None
    if not math.isfinite(number):
        raise NerAppError(f"{path}:{line}: {key}: expected a finite number, found {value[:40]!r}")
    if key in ("epoch", "step") and (number < 0 or number != int(number)):
        raise NerAppError(f"{path}:{line}: {key}: expected a whole number >= 0, found {value[:40]!r}")
    return number


def read_log(run_dir: Path) -> list[dict[str, float]]:
    """The rows of ``logs/metrics.csv`` with their non-empty fields, every one a finite number; every row has
    its ``epoch`` and ``step``."""
    path = run_dir / "logs" / "metrics.csv"
    reader = csv.DictReader(io.StringIO(_text(path), newline=""))
    if not set(LOG_COLUMNS) <= set(reader.fieldnames or []):
        raise NerAppError(f"{path}: expected columns epoch, step and val_f1 (train.py's log)")
    rows = []
    for row in reader:
        line = reader.line_num
        if None in row:
            raise NerAppError(f"{path}:{line}: expected {len(reader.fieldnames or [])} fields, found more")
        for key in ("epoch", "step"):
            if not row[key]:
                raise NerAppError(f"{path}:{line}: {key}: expected a whole number >= 0, found nothing")
        rows.append({k: _log_value(path, line, k, v) for k, v in row.items() if v})
    return rows


def learning_curves(rows: Sequence[dict[str, float]]) -> Curves:
    """Per epoch, numbered from 1 as the console numbers them: the training loss per token, dev scores of the
    fit's validations and training throughput.

    The loss is ``train_token_loss``, logged once an epoch: the summed loss of all its batches over their
    tokens (the per-step ``train_loss`` samples single batches and is not drawn). train.py validates the chosen
    checkpoint once more after fit; that validation, the log's last, is left out (metrics.json holds it), and
    every earlier one is an epoch's. Throughput comes from Lightning's cumulative ``train/time``,
    ``train/samples`` and ``train/lengths``, taken between an epoch's first and last logged batch so that
    validation time is excluded.
    """
    loss = {int(r["epoch"]) + 1: r["train_token_loss"] for r in rows if "train_token_loss" in r}
    counters: dict[int, list[dict[str, float]]] = defaultdict(list)
    for row in rows:
        if {"train/time", "train/samples", "train/lengths"} <= row.keys():
            counters[int(row["epoch"]) + 1].append(row)
    validations = [r for r in rows if "val_f1" in r][:-1]
    dev = {
        int(r["epoch"]) + 1: {k: r[f"val_{k}"] for k in ("f1", "precision", "recall") if f"val_{k}" in r}
        for r in validations
    }
    speed = {}
    for epoch, group in sorted(counters.items()):
        first, last = group[0], group[-1]
        seconds = last["train/time"] - first["train/time"]
        if seconds > 0:
            speed[epoch] = {
                "sentences": (last["train/samples"] - first["train/samples"]) / seconds,
                "tokens": (last["train/lengths"] - first["train/lengths"]) / seconds,
            }
    return dict(sorted(loss.items())), dict(sorted(dev.items())), speed


def read_predictions(run_dir: Path, split: str) -> list[Sentence]:
    """``predictions_{split}.conll``: ``token gold predicted`` lines, a blank line between sentences."""
    return read_conll_predictions(need(run_dir / f"predictions_{split}.conll"))


def read_elmo_mixes(run_dir: Path) -> tuple[list[Mix], str]:
    """softmax(w) and gamma of each ELMo mix of the best weights ([] without ELMo), and the file read."""
    from ner_app.bilm.scalar_mix import mix_values  # torch: imported only when a report reads weights

    state, source = _best_state(run_dir)
    found: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in state.items():
        match = _MIX.fullmatch(key)
        if match:
            found[int(match[1])][match[2]] = value
    mixes = []
    for k in sorted(found):
        if set(found[k]) != {"scalar_parameters", "gamma"}:
            raise NerAppError(f"{source}: ELMo mix {k} lacks its weights or gamma")
        weights, gamma = mix_values(found[k]["scalar_parameters"], found[k]["gamma"])
        mixes.append(Mix(tuple(weights), gamma))
    return mixes, source


def read_transformer_mix(run_dir: Path) -> Mix | None:
    """softmax(w) and gamma of the transformer feature's mix of the best weights (None without one)."""
    from ner_app.bilm.scalar_mix import mix_values

    state, source = _best_state(run_dir)
    found = {m[1]: v for k, v in state.items() if (m := _TRANSFORMER_MIX.fullmatch(k))}
    if not found:
        return None
    if set(found) != {"scalar_parameters", "gamma"}:
        raise NerAppError(f"{source}: the transformer's mix lacks its weights or gamma")
    weights, gamma = mix_values(found["scalar_parameters"], found["gamma"])
    return Mix(tuple(weights), gamma)


def _best_state(run_dir: Path) -> tuple[dict[str, Any], str]:
    """The best weights of the run (its export's, else its best checkpoint's) and the file read."""
    export, best = run_dir / "export" / "model.safetensors", run_dir / "checkpoints" / "best.ckpt"
    state: dict[str, Any]
    if export.is_file():
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = dict(load_file(str(export)))
        except (SafetensorError, OSError) as err:
            raise NerAppError(f"{export}: not a readable safetensors file ({err})") from None
        source = export
    elif best.is_file():
        from ner_app.runtime.checkpoint import load_checkpoint

        state, source = load_checkpoint(best).get("state_dict", {}), best
    else:
        raise MissingFileError(f"{export}: not found, nor {best} (the run's trained weights)")
    return state, str(source)


def read_model_types(run_dir: Path) -> list[str]:
    """The entity types the run's model knows (its tag vocabulary, sorted): the types the predictions page of
    its export shows, so that the run report colours them alike. From ``export/tagger.json``, or without an
    export from the spec in ``checkpoints/best.ckpt``."""
    from ner_app.tagger.export import read_spec
    from ner_app.tagger.spec import TaggerSpec

    spec_path, best = run_dir / "export" / "tagger.json", run_dir / "checkpoints" / "best.ckpt"
    if spec_path.is_file():
        spec = read_spec(spec_path)[0]
    elif best.is_file():
        from ner_app.runtime.checkpoint import load_checkpoint

        spec = TaggerSpec.from_json(load_checkpoint(best, mmap=True).get("ner_app"), f"{best} (tagger spec)")
    else:
        raise MissingFileError(f"{spec_path}: not found, nor {best} (the model's tag vocabulary)")
    return entity_types(spec.tag_vocab.itos)
