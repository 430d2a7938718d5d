"""The run report's learning curves (``report RUN_DIR``): what each curve is, the chart, and the curves too
short to draw written out."""

from __future__ import annotations

from ner_app.report import charts, page

CURVES_NOTE = (
    "Epochs are numbered from 1, as the console numbers them. Train loss: each epoch's loss per token, the "
    "summed loss of all its batches (the CRF's negative log-likelihood; with ELMo, plus its mix penalty) "
    "divided by all their tokens; the log's per-step train_loss, one batch's loss per sentence, is not drawn. Dev: entity "
    "precision, recall and F1 (%) after each epoch. Throughput: training sentences and tokens per second "
    f"within each epoch, validation left out. A curve of fewer than {charts.MIN_POINTS} epochs is written "
    "out instead of drawn."
)


SCORE_NAMES = (("f1", "F1"), ("precision", "precision"), ("recall", "recall"))


def _curve_lines(
    loss: dict[int, float], dev: dict[int, dict[str, float]], speed: dict[int, dict[str, float]]
) -> list[str]:
    """One line per learning curve with fewer than ``charts.MIN_POINTS`` epochs: its values, or why it has none."""
    curves = {
        "Train loss per token": (
            {e: f"{v:.4g}" for e, v in loss.items()},
            "logs/metrics.csv has no train_token_loss",
        ),
        "Dev entity scores": (
            {e: ", ".join(f"{name} {v[k]:.2f}" for k, name in SCORE_NAMES if k in v) for e, v in dev.items()},
            "no validation in logs/metrics.csv",
        ),
        "Training throughput": (
            {e: f"{v['sentences']:.1f} sentences/s, {v['tokens']:.0f} tokens/s" for e, v in speed.items()},
            "not measured: no epoch logged two training steps",
        ),
    }
    lines = []
    for title, (points, missing) in curves.items():
        if not points:
            lines.append(f"{title}: {missing}.")
        elif len(points) < charts.MIN_POINTS:
            values = "; ".join(f"epoch {e}: {text}" for e, text in points.items())
            lines.append(f"{title}: {values} (not drawn: fewer than {charts.MIN_POINTS} epochs).")
    return lines


def curves_section(
    loss: dict[int, float], dev: dict[int, dict[str, float]], speed: dict[int, dict[str, float]]
) -> str:
    """The report's learning curves: train loss per token, dev scores and throughput by epoch, drawn where
    there are enough epochs and written out where there are not."""
    parts = [page.paragraph(CURVES_NOTE, note=True)]
    figure = charts.learning_curves(loss, dev, speed)
    if figure is not None:
        parts.append(page.image(figure, "learning curves"))
    parts += [page.paragraph(line) for line in _curve_lines(loss, dev, speed)]
    return page.section("learning-curves", "Learning curves", parts)
