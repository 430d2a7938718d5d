"""The one HTML page shell of the run report, ``compare --html`` and ``predict --format html``.

A page is one self-contained file: inline CSS, images as PNG data URIs, no script and no URL, behind a
Content-Security-Policy that allows neither. Every piece of text that comes from a run or a user (tokens,
entity types, paths) goes through ``esc``; the helpers below take plain text and escape it themselves, so
callers never build markup from user data. Entity types get one colour each from one palette
(``type_colours``), the same for one model on every page. Charts are matplotlib figures on the Agg canvas (no
display, no pyplot state).
"""

from __future__ import annotations

import base64
import colorsys
import io
from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# (background, border) per entity type: light fills keep black text readable; CoNLL's four types keep their
# colours whatever else a model knows, so pages of different runs and models read alike.
NAMED_COLOURS = {
    "PER": ("#cfe3ff", "#1f5fbf"),
    "LOC": ("#cdf2cd", "#2e8b2e"),
    "ORG": ("#ffe2b8", "#c46a00"),
    "MISC": ("#f1d4f4", "#8e3a99"),
}
SPARE_COLOURS = (
    ("#fff3a6", "#9a8400"),
    ("#c9f1f1", "#1a8080"),
    ("#ffd3d3", "#b32d2d"),
    ("#e0e0e0", "#555555"),
)

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
DPI = 90
PNG_URI = "data:image/png;base64,"

CSS = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #111;
       background: #fff; }
h1 { font-size: 1.4em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; display: block; max-width: 100%; overflow-x: auto; }
caption { text-align: left; font-weight: 600; padding-bottom: .3em; width: max-content; max-width: 64em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; } th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
img { max-width: 100%; display: block; margin: .5em 0; }
.note { color: #555; font-size: .9em; }
mark { padding: .05em .15em; border-radius: .25em; border: 1px solid; color: inherit; }
mark[data-type]::after { content: attr(data-type); font-size: .62em; font-weight: 600; margin-left: .3em;
                         vertical-align: .25em; }
mark[data-type].bad { border: 2px solid #d22; }
sup.alts { font-size: .62em; color: #555; margin-left: .15em; }
.flag { border-bottom: 2px dashed #d22; } .flag::after { content: "?"; color: #d22; font-size: .7em; }
.legend { position: sticky; top: 0; background: #fff; padding: .4em 0; border-bottom: 1px solid #ccc; }
.legend mark { margin-right: .6em; }
.lines { counter-reset: line; font-size: 16px; line-height: 1.9; }
.lines > .line { white-space: pre-wrap; overflow-wrap: anywhere; min-height: 1.9em; padding-left: 3.5em;
                 position: relative; }
.lines > .line::before { counter-increment: line; content: counter(line); position: absolute; left: 0;
                         width: 2.8em; text-align: right; color: #999; font-size: .8em; }
.sentence { margin: .7em 0; padding: .3em .6em; border-left: 3px solid #ccc; }
.tagged { line-height: 2.1; } .who { display: inline-block; width: 6em; color: #555; font-size: .85em; }
.summary { color: #555; border-top: 1px solid #ccc; margin-top: 1em; padding-top: .4em; }
"""


# Bidirectional controls (LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI, LRM, RLM, ALM) would reorder the text
# around them on screen: a token could show as another. They are shown as their code point instead.
_BIDI = {c: f"[U+{c:04X}]" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def esc(text: object) -> str:
    """Text for HTML element content or a quoted attribute value; bidirectional controls made visible."""
    return escape(str(text).translate(_BIDI), quote=True)


# ------------------------------------------------------------------------------ entity types and colours
def type_colours(types: Iterable[str], extra: Iterable[str] = ()) -> dict[str, tuple[str, str]]:
    """A distinct (background, border) colour pair per type: CoNLL's four always get theirs; the others, in
    sorted order, the spare colours and then hues around the circle. ``types`` are a model's entity types
    (its tag vocabulary, as the predictions page shows them); ``extra`` types not among them (gold types the
    model never learnt, on the run report) come after them, so they never change a model type's colour: one
    model's types look the same on its run report and on its predictions page."""
    known = set(types)
    colours = {}
    spare = iter(SPARE_COLOURS)
    others = 0
    for kind in [*sorted(known), *sorted(set(extra) - known)]:
        pair = NAMED_COLOURS.get(kind) or next(spare, None)
        if pair is None:  # more types than named colours: spread the rest around the hue circle
            hue = (0.13 + 0.618 * others) % 1.0
            pair = (_hex(colorsys.hls_to_rgb(hue, 0.88, 0.7)), _hex(colorsys.hls_to_rgb(hue, 0.35, 0.7)))
        others += kind not in NAMED_COLOURS
        colours[kind] = pair
    return colours


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb)


def _css_string(text: str) -> str:
    """``text`` inside a double-quoted CSS string (and inside <style>, where "<" could end the element)."""
    return "".join(c if c.isalnum() or c in "-_ " else f"\\{ord(c):x} " for c in text)


def colour_rules(types: Iterable[str], extra: Iterable[str] = ()) -> str:
    """One CSS rule per type (``type_colours``' arguments): its ``<mark data-type=...>`` in its colours."""
    return "".join(
        f'mark[data-type="{_css_string(kind)}"] {{ background: {fill}; border-color: {line}; }}\n'
        for kind, (fill, line) in type_colours(types, extra).items()
    )


def mark(kind: str, inner: str, title: str = "", bad: bool = False) -> str:
    """``inner`` (markup, already escaped) highlighted as an entity of type ``kind``; ``bad`` frames it red."""
    attributes = f' data-type="{esc(kind)}"'
    if title:
        attributes += f' title="{esc(title)}"'
    if bad:
        attributes += ' class="bad"'
    return f"<mark{attributes}>{inner}</mark>"


def legend(types: Iterable[str]) -> str:
    """An empty mark per type, labelled by the CSS with its name: the page's colour key."""
    return '<div class="legend">' + "".join(mark(t, "") for t in type_colours(types)) + "</div>"


# ------------------------------------------------------------------------------ page, sections and tables
def head(title: str, types: Iterable[str] = (), extra: Iterable[str] = ()) -> str:
    """The page up to and including its ``<h1>``; ``types`` and ``extra`` get their colour rules
    (``type_colours``)."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n<title>{esc(title)}</title>\n'
        f"<style>{CSS}{colour_rules(types, extra)}</style>\n</head>\n<body>\n<h1>{esc(title)}</h1>\n"
    )


TAIL = "</body>\n</html>\n"


def page(title: str, parts: Sequence[str], types: Iterable[str] = (), extra: Iterable[str] = ()) -> str:
    """The whole document: ``head``, the ``parts`` (markup built by the helpers here), the end."""
    return head(title, types, extra) + "\n".join(parts) + "\n" + TAIL


def paragraph(text: str, note: bool = False) -> str:
    return f'<p class="note">{esc(text)}</p>' if note else f"<p>{esc(text)}</p>"


def section(anchor: str, title: str, parts: Sequence[str]) -> str:
    """A titled section; ``parts`` are markup built by the helpers here."""
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>\n' + "\n".join(parts) + "\n</section>"


def _cell(value: object, numeric: bool) -> str:
    if isinstance(value, float):
        return f'<td class="num">{value:.2f}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="num">{value}</td>'
    return f'<td class="num">{esc(value)}</td>' if numeric else f"<td>{esc(value)}</td>"


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    caption: str = "",
    numeric: Sequence[bool] = (),
) -> str:
    """A table of text and numbers: floats shown with two decimals, numbers and ``numeric`` columns
    right-aligned; a table wider than the page scrolls within it."""
    flags = list(numeric) + [False] * (len(header) - len(numeric))
    head_row = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(_cell(v, n) for v, n in zip(row, flags, strict=True)) + "</tr>\n" for row in rows
    )
    title = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{head_row}</tr></thead>\n<tbody>{body}</tbody></table>"


# ------------------------------------------------------------------------------ charts
def new_figure(width: float, height: float, dpi: int = DPI) -> Figure:
    """A figure of ``width`` x ``height`` inches on its own Agg canvas (thread-safe, never shown)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plain(text: str) -> str:
    """``text`` for a matplotlib label, shown as written: a ``$`` would otherwise start math text."""
    return text.replace("$", r"\$")


def png_uri(figure: Figure) -> str:
    """The figure as a PNG ``data:`` URI, so that a page holds its images itself."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    return PNG_URI + base64.b64encode(buffer.getvalue()).decode("ascii")


def image(figure: Figure, alt: str) -> str:
    """An ``<img>`` holding the figure as an embedded PNG."""
    return f'<img src="{png_uri(figure)}" alt="{esc(alt)}">'
