"""``predict --format html``: the input text with its predicted entities highlighted, one colour per type.

The page is one self-contained file (inline CSS, no script, no outside resource) written line by line, so a
large input streams like the other formats. Every piece of user text goes through ``html.escape``; a
Content-Security-Policy that allows no script is a second wall in case a future edit forgets one.
"""

from __future__ import annotations

import colorsys
import html
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ner_app.text.tags import split_tag

# (background, border) per type: light fills keep black text readable; CoNLL's four types keep their colours
# whatever else the model knows, so pages of different models read alike.
_PALETTE = {
    "PER": ("#cfe3ff", "#1f5fbf"),
    "LOC": ("#cdf2cd", "#2e8b2e"),
    "ORG": ("#ffe2b8", "#c46a00"),
    "MISC": ("#f1d4f4", "#8e3a99"),
}
_SPARE = [("#fff3a6", "#9a8400"), ("#c9f1f1", "#1a8080"), ("#ffd3d3", "#b32d2d"), ("#e0e0e0", "#555555")]

_CSS = """
body { font: 16px/1.9 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #111; }
h1 { font-size: 1.3em; }
.legend { position: sticky; top: 0; background: #fff; padding: .4em 0; border-bottom: 1px solid #ccc; }
.legend mark { margin-right: .6em; }
.lines { counter-reset: line; }
.line { white-space: pre-wrap; overflow-wrap: anywhere; min-height: 1.9em; padding-left: 3.5em;
        position: relative; }
.line::before { counter-increment: line; content: counter(line); position: absolute; left: 0; width: 2.8em;
                text-align: right; color: #999; font-size: .8em; }
mark { padding: .05em .15em; border-radius: .25em; border: 1px solid; color: inherit; }
mark[data-type]::after { content: attr(data-type); font-size: .62em; font-weight: 600; margin-left: .3em;
                         vertical-align: .25em; }
.summary { color: #555; border-top: 1px solid #ccc; margin-top: 1em; padding-top: .4em; }
"""


def entity_types(tags: Iterable[str]) -> list[str]:
    """The entity types of a tag vocabulary ("B-PER", "I-PER", "O", ... -> ["PER"]), sorted."""
    return sorted({split_tag(tag)[1] for tag in tags if tag not in ("O", "<pad>", "<unk>")})


def type_colours(types: Sequence[str]) -> dict[str, tuple[str, str]]:
    """A distinct (background, border) colour pair per type; the same type always gets the same pair."""
    colours = {t: _PALETTE[t] for t in types if t in _PALETTE}
    spare = iter(_SPARE)
    for n, kind in enumerate(t for t in sorted(types) if t not in _PALETTE):
        pair = next(spare, None)
        if pair is None:  # more types than named colours: spread the rest around the hue circle
            hue = (0.13 + 0.618 * n) % 1.0
            pair = (_hex(colorsys.hls_to_rgb(hue, 0.88, 0.7)), _hex(colorsys.hls_to_rgb(hue, 0.35, 0.7)))
        colours[kind] = pair
    return colours


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb)


def _style(colours: Mapping[str, tuple[str, str]]) -> str:
    rules = [
        f'mark[data-type="{_css_string(kind)}"] {{ background: {fill}; border-color: {line}; }}'
        for kind, (fill, line) in colours.items()
    ]
    return _CSS + "\n".join(rules) + "\n"


def _css_string(text: str) -> str:
    """``text`` inside a double-quoted CSS string (and inside <style>, where "<" could end the element)."""
    return "".join(c if c.isalnum() or c in "-_ " else f"\\{ord(c):x} " for c in text)


def highlighted_line(text: str, found: Sequence[Mapping[str, Any]]) -> str:
    """``text`` as escaped HTML with each entity wrapped in ``<mark data-type=TYPE>``.

    ``found`` holds the predictor's entities: character offsets into ``text``, sorted and not overlapping.
    """
    parts, at = [], 0
    for entity in sorted(found, key=lambda e: e["start"]):
        start, end, kind = entity["start"], entity["end"], entity["type"]
        if not at <= start < end <= len(text):
            raise ValueError(f"entity {start}:{end} overlaps another or leaves the line (length {len(text)})")
        title = f"{kind} {entity['score']:.2f}" if "score" in entity else kind
        parts += [
            html.escape(text[at:start]),
            f'<mark data-type="{html.escape(kind)}" title="{html.escape(title)}">',
            html.escape(text[start:end]),
            "</mark>",
        ]
        at = end
    parts.append(html.escape(text[at:]))
    return "".join(parts)


def predictions_html(
    results: Iterable[Mapping[str, Any]], types: Sequence[str], title: str = "Predicted entities"
) -> Iterator[str]:
    """The page, in pieces to write in order: head and legend, one ``<div>`` per result line, a summary.

    ``results`` are the predictor's ``{"text", "entities"}`` objects; ``types`` are the model's entity types
    (known before any line is tagged, which is what lets the legend come first while lines stream).
    """
    colours = type_colours(types)
    legend = "".join(f'<mark data-type="{html.escape(t)}"></mark>' for t in colours)
    yield (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_style(colours)}</style>\n</head>\n<body>\n"
        f'<h1>{html.escape(title)}</h1>\n<div class="legend">{legend}</div>\n<div class="lines">\n'
    )
    counts: Counter[str] = Counter()
    lines = 0
    for result in results:
        lines += 1
        counts.update(e["type"] for e in result["entities"])
        yield f'<div class="line">{highlighted_line(result["text"], result["entities"])}</div>\n'
    by_type = ", ".join(f"{html.escape(t)} {counts[t]}" for t in sorted(counts))
    yield (
        f'</div>\n<p class="summary">{lines} lines, {sum(counts.values())} entities'
        f"{f' ({by_type})' if by_type else ''}</p>\n</body>\n</html>\n"
    )
