"""The report's charts: matplotlib figures drawn with the Agg canvas (no display, no pyplot state), embedded
as PNG data URIs.

``figure_to_data_uri`` is the one public helper other pages reuse: any matplotlib ``Figure`` -> a
``data:image/png;base64,...`` string for an ``<img src>``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 90


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches on its own Agg canvas (thread-safe, never shown)."""
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def figure_to_data_uri(figure: Figure, dpi: int = DPI) -> str:
    """The figure as a PNG ``data:`` URI, so that an HTML page holds its images itself."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def learning_curves(
    loss: Mapping[int, float],
    dev: Mapping[int, Mapping[str, float]],
    speed: Mapping[int, Mapping[str, float]],
) -> Figure:
    """Three panels over epochs: mean train loss, dev P/R/F1 (%), training sentences/s and tokens/s."""
    figure = new_figure(11, 3.2)
    ax_loss, ax_dev, ax_speed = figure.subplots(1, 3)
    ax_loss.plot(list(loss), list(loss.values()), marker="o", color="tab:blue")
    ax_loss.set(title="train loss (mean per sentence)", xlabel="epoch")
    for key, color in (("f1", "tab:red"), ("precision", "tab:green"), ("recall", "tab:orange")):
        epochs = [e for e in dev if key in dev[e]]
        ax_dev.plot(epochs, [dev[e][key] for e in epochs], marker="o", color=color, label=key)
    ax_dev.set(title="dev entity scores (%)", xlabel="epoch")
    ax_dev.legend(loc="lower right", fontsize="small")
    epochs = list(speed)
    ax_speed.plot(epochs, [speed[e]["sentences"] for e in epochs], marker="o", color="tab:purple")
    ax_speed.set(title="training throughput", xlabel="epoch")
    ax_speed.set_ylabel("sentences / s", color="tab:purple")
    tokens = ax_speed.twinx()
    tokens.plot(epochs, [speed[e]["tokens"] for e in epochs], marker="s", color="tab:gray")
    tokens.set_ylabel("tokens / s", color="tab:gray")
    for ax in (ax_loss, ax_dev, ax_speed):
        ax.grid(alpha=0.3)
    return figure


def per_type_scores(scores: Mapping[str, Mapping[str, Mapping[str, float]]]) -> Figure:
    """Grouped bars: F1 per entity type, one bar per split (``scores[split][type]['f1']``)."""
    splits = list(scores)
    types = sorted({t for split in splits for t in scores[split]})
    figure = new_figure(max(4.0, 1.2 * len(types) + 2), 3.0)
    ax = figure.subplots()
    width = 0.8 / max(len(splits), 1)
    for k, split in enumerate(splits):
        xs = [i + (k - (len(splits) - 1) / 2) * width for i in range(len(types))]
        values = [scores[split].get(t, {}).get("f1", 0.0) for t in types]
        ax.bar(xs, values, width=width, label=split)
    ax.set_xticks(range(len(types)), types)
    ax.set(ylim=(0, 105), ylabel="F1 (%)", title="entity F1 per type")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return figure


def confusion_matrix(labels: Sequence[str], rows: Sequence[Sequence[int]], title: str) -> Figure:
    """A heat map of counts, gold types down, predicted types across, each cell labelled."""
    size = 1.0 + 0.7 * len(labels)
    figure = new_figure(size + 0.4, size)
    ax = figure.subplots()
    ax.imshow(rows, cmap="Blues")  # the counts are written in the cells: no colour bar
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set(xlabel="predicted type", ylabel="gold type", title=title)
    peak = max((v for row in rows for v in row), default=0)
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            ax.text(
                j, i, str(value), ha="center", va="center", color="white" if value > peak / 2 else "black"
            )
    return figure


def layer_weights(mixes: Sequence[tuple[Sequence[float], float]]) -> Figure:
    """softmax(w) per biLM layer for each ELMo mix, gamma in the legend."""
    layers = max(len(w) for w, _ in mixes)
    figure = new_figure(max(3.5, 1.0 + 0.9 * layers * len(mixes)), 2.8)
    ax = figure.subplots()
    width = 0.8 / len(mixes)
    for k, (weights, gamma) in enumerate(mixes):
        xs = [j + (k - (len(mixes) - 1) / 2) * width for j in range(len(weights))]
        ax.bar(xs, weights, width=width, label=f"mix {k}: gamma = {gamma:.3f}")
    ax.set_xticks(range(layers), ["layer 0 (char CNN)", *[f"layer {j}" for j in range(1, layers)]])
    ax.set(ylim=(0, 1), ylabel="softmax(w)", title="ELMo layer weights")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return figure
