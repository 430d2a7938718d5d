"""Entity calibration of an export on gold files: ECE, log loss and accuracy at temperature 1 and at the
export's calibration temperature, with the F1 (the same at every temperature).

    python -m benchmarks.calibration --model data/models/conll2003  # long job: CoNLL-2003 dev and test, minutes
    python -m benchmarks.calibration --model runs/tiny/export --files tests/data/tiny_conll/valid.txt

An entity is correct when its span and type equal a gold entity's; its score is the probability of its reading
(what ``predict`` reports). ECE over 10 equal-width bins (``ner_app.text.reliability``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from benchmarks.common import SHARED, print_table
from ner_app.decisions.calibrate import gold_set
from ner_app.predict.predictor import Predictor
from ner_app.tagger.crf.calibration import scores_at
from ner_app.text.reliability import expected_calibration_error, log_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="an export folder")
    conll = SHARED / "data" / "conll2003"
    parser.add_argument("--files", type=Path, nargs="+", default=[conll / "valid.txt", conll / "test.txt"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    predictor = Predictor.from_export(args.model)
    crf, calibration = predictor.tagger.crf, predictor.spec.calibration
    temperature = 1.0 if calibration is None else calibration.temperature
    rows = []
    for path in args.files:
        data = gold_set(predictor, path)
        accuracy = sum(data.correct) / max(1, data.entities)
        for t in sorted({1.0, temperature}):
            scores = scores_at(crf, data, t)
            ece, loss = expected_calibration_error(scores, data.correct), log_loss(scores, data.correct)
            outside = sum(not 0.0 <= s <= 1.0 for s in scores)
            rows.append(
                [
                    path.name,
                    f"{t:.4f}",
                    str(data.entities),
                    f"{accuracy:.4f}",
                    f"{ece:.4f}",
                    f"{loss:.4f}",
                    str(outside),
                ]
            )
    print(f"\n{args.model}: calibration temperature {temperature:.4f}\n")
    print_table(
        ["file", "temperature", "entities", "accuracy", "ECE", "log loss", "scores outside [0, 1]"], rows
    )


if __name__ == "__main__":
    main()
