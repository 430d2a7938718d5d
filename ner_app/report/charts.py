"""The pages' charts: matplotlib figures built on ``page.new_figure``, embedded with ``page.image``.

Text that comes from a run (entity types, config names) goes through ``page.plain``, so that matplotlib
shows it as written instead of reading ``$...$`` as math.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ner_app.report.page import new_figure, plain
from ner_app.train.metrics import Mix

MIN_POINTS = 3  # a learning curve of fewer points is written out as a line of text, not drawn


def learning_curves(
    loss: Mapping[int, float],
    dev: Mapping[int, Mapping[str, float]],
    speed: Mapping[int, Mapping[str, float]],
) -> Figure | None:
    """Side by side over whole epochs (numbered as given, ticks on whole numbers), each panel only when it has
    at least ``MIN_POINTS`` epochs: train loss per token, dev P/R/F1 (%), training sentences/s and tokens/s.
    None when no panel has enough."""
    panels = [
        name for name, points in (("loss", loss), ("dev", dev), ("speed", speed)) if len(points) >= MIN_POINTS
    ]
    if not panels:
        return None
    figure = new_figure(max(4.4, 11 * len(panels) / 3), 3.2)
    axes = dict(zip(panels, figure.subplots(1, len(panels), squeeze=False)[0], strict=True))
    if "loss" in axes:
        ax = axes["loss"]
        ax.plot(list(loss), list(loss.values()), marker="o", color="tab:blue")
        ax.set(title="train loss per token (epoch mean)", xlabel="epoch")
    if "dev" in axes:
        ax = axes["dev"]
        for key, color in (("f1", "tab:red"), ("precision", "tab:green"), ("recall", "tab:orange")):
            epochs = [e for e in dev if key in dev[e]]
            ax.plot(epochs, [dev[e][key] for e in epochs], marker="o", color=color, label=key)
        ax.set(title="dev entity scores (%)", xlabel="epoch")
        ax.legend(loc="best", fontsize="small")
    if "speed" in axes:
        ax = axes["speed"]
        epochs = list(speed)
        ax.plot(epochs, [speed[e]["sentences"] for e in epochs], marker="o", color="tab:purple")
        ax.set(title="training throughput", xlabel="epoch")
        ax.set_ylabel("sentences / s", color="tab:purple")
        tokens = ax.twinx()
        tokens.plot(epochs, [speed[e]["tokens"] for e in epochs], marker="s", color="tab:gray")
        tokens.set_ylabel("tokens / s", color="tab:gray")
    for name, ax in axes.items():
        epochs = list({"loss": loss, "dev": dev, "speed": speed}[name])
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs: no 0.5 between two of them
        ax.grid(alpha=0.3)
    return figure


def per_type_scores(scores: Mapping[str, Mapping[str, float]]) -> Figure:
    """Grouped bars: F1 per entity type, one bar per split (``scores[split][type]``)."""
    splits = list(scores)
    types = sorted({t for split in splits for t in scores[split]})
    figure = new_figure(max(4.0, 1.2 * len(types) + 2), 3.0)
    ax = figure.subplots()
    width = 0.8 / max(len(splits), 1)
    for k, split in enumerate(splits):
        xs = [i + (k - (len(splits) - 1) / 2) * width for i in range(len(types))]
        values = [scores[split].get(t, 0.0) for t in types]
        ax.bar(xs, values, width=width, label=plain(split))
    ax.set_xticks(range(len(types)), [plain(t) for t in types])
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
    names = [plain(label) for label in labels]
    ax.set_xticks(range(len(labels)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), names)
    ax.set(xlabel="predicted type", ylabel="gold type", title=plain(title))
    peak = max((v for row in rows for v in row), default=0)
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            ax.text(
                j, i, str(value), ha="center", va="center", color="white" if value > peak / 2 else "black"
            )
    return figure


def layer_weights(mixes: Sequence[Mix]) -> Figure:
    """softmax(w) per biLM layer for each ELMo mix, gamma in the legend."""
    layers = max(len(m.softmax_w) for m in mixes)
    figure = new_figure(max(3.5, 1.0 + 0.9 * layers * len(mixes)), 2.8)
    ax = figure.subplots()
    width = 0.8 / len(mixes)
    for k, mix in enumerate(mixes):
        xs = [j + (k - (len(mixes) - 1) / 2) * width for j in range(len(mix.softmax_w))]
        ax.bar(xs, mix.softmax_w, width=width, label=f"{mix.place(k)} mix: gamma = {mix.gamma:.3f}")
    ax.set_xticks(range(layers), ["layer 0 (char CNN)", *[f"layer {j}" for j in range(1, layers)]])
    ax.set(ylim=(0, 1), ylabel="softmax(w)", title="ELMo layer weights")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return figure


def fitted_range(values: Sequence[float]) -> tuple[float, float]:
    """An F1 axis (%) around ``values``: their span plus 15% either side (at least 0.03 points), within 0-100."""
    low, high = min(values, default=0.0), max(values, default=100.0)
    margin = max(high - low, 0.2) * 0.15
    return max(0.0, low - margin), min(100.0, high + margin)


def seed_scores(names: Sequence[str], scores: Mapping[str, Sequence[Sequence[float]]]) -> Figure:
    """F1 per group and split: a dot per seed, the mean as a bar across them with one sample std either side.

    ``scores[split][group]`` holds the group's per-seed values. The axis spans the values (with a margin), not
    0 to 100, so that a difference of a tenth of a point is as visible as one of ten points; the axis label says
    where it starts when that is not 0.
    """
    figure = new_figure(max(5.0, 1.3 * len(names) + 2.5), 3.6, dpi=110)
    ax = figure.subplots()
    width = 0.38
    shown: list[float] = []
    for k, (split, colour) in enumerate(zip(scores, ("#4c78a8", "#f58518"), strict=False)):
        xs = [i + (k - (len(scores) - 1) / 2) * width for i in range(len(names))]
        means = [statistics.fmean(values) for values in scores[split]]
        stds = [statistics.stdev(values) if len(values) > 1 else 0.0 for values in scores[split]]
        ax.errorbar(
            xs,
            means,
            yerr=stds,
            fmt="_",
            markersize=22,
            markeredgewidth=2,
            color=colour,
            ecolor="black",
            capsize=4,
            linewidth=1,
            label=f"{plain(split)} F1",
        )
        for x, values in zip(xs, scores[split], strict=True):
            ax.scatter(
                [x] * len(values),
                values,
                s=16,
                color=colour,
                edgecolors="black",
                linewidths=0.5,
                zorder=3,
                clip_on=False,
            )
            shown += values
        shown += [m + sign * d for m, d in zip(means, stds, strict=True) for sign in (-1, 1)]
    low, high = fitted_range(shown)
    ax.set_ylim(low, high)
    ax.set_xticks(range(len(names)), [plain(n) for n in names], rotation=15 if len(names) > 3 else 0)
    # A fitted axis magnifies differences: the label says so, so that a gap is not read as a large one.
    ax.set_ylabel("entity F1 (%)" if low == 0 else f"entity F1 (%); the axis starts at {low:.2f}, not 0")
    ax.set_title("F1 per config: a dot per seed, mean ± sample std", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return figure
