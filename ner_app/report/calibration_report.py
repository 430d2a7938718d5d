"""The run report's calibration section: the temperature fitted on dev, the entity ECE and log loss before and
after it on dev and test, and a reliability diagram per split (from the run's ``calibration.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ner_app.errors import NerAppError
from ner_app.records import read_json
from ner_app.report import page
from ner_app.train.calibration import CALIBRATION_FILE
from ner_app.train.corpus import EVALUATED

MAX_CALIBRATION_BYTES = 1 << 20  # calibration.json: a few numbers and 40 bins


def read_calibration(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``calibration.json`` (None when the run has none); one line naming the file when it is not
    one ``train.py`` writes."""
    path = run_dir / CALIBRATION_FILE
    if not path.is_file():
        return None
    data = read_json(path, MAX_CALIBRATION_BYTES, NerAppError)
    try:
        float(data["temperature"])
        for split in EVALUATED:
            for when in ("before", "after"):
                part = data[split][when]
                float(part["ece"]), float(part["log_loss"])
                for b in part["bins"]:
                    float(b["low"]), float(b["high"]), int(b["count"]), float(b["confidence"])
                    float(b["accuracy"])
    except (KeyError, TypeError, ValueError):
        raise NerAppError(
            f"{path}: not the calibration record of a train.py run (expected the temperature and, for dev and "
            "test, the ECE, log loss and bins before and after)"
        ) from None
    return dict(data)


def reliability_diagram(data: Mapping[str, Any]) -> Figure:
    """One panel per split: the accuracy of each score bin against its mean score, before and after
    calibration, the diagonal (perfect calibration), and the share of entities per bin underneath."""
    figure = page.new_figure(9.0, 4.2)
    panels: Any = figure.subplots(2, len(EVALUATED), height_ratios=[3, 1], squeeze=False)
    for column, split in enumerate(EVALUATED):
        top, bottom = panels[0][column], panels[1][column]
        top.plot([0, 1], [0, 1], color="tab:gray", linestyle="--", linewidth=1, label="perfectly calibrated")
        for when, colour in (("before", "tab:red"), ("after", "tab:blue")):
            part = data[split][when]
            bins = [b for b in part["bins"] if b["count"]]
            top.plot(
                [b["confidence"] for b in bins],
                [b["accuracy"] for b in bins],
                marker="o",
                color=colour,
                label=f"{when} (ECE {part['ece']:.3f})",
            )
        top.set(
            title=f"{split}: entity accuracy per score bin", xlim=(0, 1), ylim=(0, 1.02), ylabel="accuracy"
        )
        top.legend(loc="upper left", fontsize="small")
        top.grid(alpha=0.3)
        total = max(sum(b["count"] for b in data[split]["after"]["bins"]), 1)
        for when, colour, shift in (("before", "tab:red", -0.02), ("after", "tab:blue", 0.02)):
            bins = data[split][when]["bins"]
            bottom.bar(
                [(b["low"] + b["high"]) / 2 + shift for b in bins],
                [b["count"] / total for b in bins],
                width=0.04,
                color=colour,
            )
        bottom.set(xlim=(0, 1), xlabel="entity score", ylabel="share")
    return figure


def calibration_section(run_dir: Path) -> str:
    """The section: a table and the diagram, or one sentence when the run has no calibration."""
    data = read_calibration(run_dir)
    if data is None:
        return page.section(
            "calibration",
            "Score calibration",
            [
                page.paragraph(
                    f"This run has no calibration ({CALIBRATION_FILE} is absent: a run of an older version, or "
                    "a tagger that predicted no entity on dev)."
                )
            ],
        )
    rows = [
        [
            split,
            data[split]["entities"],
            *(f"{data[split][when][key]:.4f}" for key in ("ece", "log_loss") for when in ("before", "after")),
        ]
        for split in EVALUATED
    ]
    header = ["split", "predicted entities", "ECE before", "ECE after", "log loss before", "log loss after"]
    note = (
        f"Temperature {data['temperature']:.3f}, fitted on dev: every CRF score is divided by it before "
        "probabilities are computed, so the predicted entities (and F1) do not change. ECE: the mean gap between "
        "an entity's score and how often entities of that score are right, over 10 equal-width bins."
    )
    return page.section(
        "calibration",
        "Score calibration",
        [
            page.paragraph(note, note=True),
            page.table(header, rows, numeric=[False] + [True] * 5),
            page.image(reliability_diagram(data), "reliability diagram"),
        ],
    )
