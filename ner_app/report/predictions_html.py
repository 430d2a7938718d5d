"""``predict --format html``: the input text with its predicted entities highlighted, one colour per type.

The page (``page``'s shell: inline CSS, no script, no outside resource, a Content-Security-Policy that
allows no script as a second wall) is written line by line, so a large input streams like the other formats.
Every piece of user text is escaped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ner_app.report import page
from ner_app.text.tags import entity_types

__all__ = [
    "entity_types",
    "highlighted_line",
    "predictions_html",
]  # entity_types: the tag grammar's, for callers


def highlighted_line(
    text: str, found: Sequence[Mapping[str, Any]], flagged: Sequence[Mapping[str, Any]] = ()
) -> str:
    """``text`` as escaped HTML with each entity wrapped in ``<mark data-type=TYPE>`` (its score and
    alternatives in its title; the alternatives, when asked for, also in a small ``<sup>`` after it) and each
    flagged token in ``<span class="flag">`` (its probability of O and its most probable reading in the title).

    ``found`` holds the predictor's entities and ``flagged`` its flagged tokens: character offsets into
    ``text``, not overlapping (flagged tokens are tagged O, outside every entity).
    """
    spans = [(e["start"], e["end"], e, False) for e in found] + [
        (f["start"], f["end"], f, True) for f in flagged
    ]
    parts, at = [], 0
    for start, end, item, is_flag in sorted(spans, key=lambda s: s[0]):
        if not at <= start < end <= len(text):
            raise ValueError(f"entity {start}:{end} overlaps another or leaves the line (length {len(text)})")
        parts.append(page.esc(text[at:start]))
        inner = page.esc(text[start:end])
        if is_flag:
            reading = item["reading"]
            title = (
                f"O {item['o_score']:.2f}; maybe {reading['type']} {reading['score']:.2f}: {reading['text']}"
            )
            parts.append(f'<span class="flag" title="{page.esc(title)}">{inner}</span>')
        else:
            kind = item["type"]
            title = f"{kind} {item['score']:.2f}" if "score" in item else kind
            others = item.get("alternatives")
            if others:
                title += "; or " + ", ".join(f"{a['type']} {a['score']:.2f}: {a['text']}" for a in others)
            parts.append(page.mark(kind, inner, title))
            if others is not None:
                listed = ", ".join(f"{a['type']} {a['score']:.2f}" for a in others) or "none"
                parts.append(f'<sup class="alts">or {page.esc(listed)}</sup>')
        at = end
    parts.append(page.esc(text[at:]))
    return "".join(parts)


def predictions_html(
    results: Iterable[Mapping[str, Any]], types: Sequence[str], title: str = "Predicted entities"
) -> Iterator[str]:
    """The page, in pieces to write in order: head and legend, one ``<div>`` per result line, a summary.

    ``results`` are the predictor's ``{"text", "entities"}`` objects; ``types`` are the model's entity types
    (known before any line is tagged, which is what lets the legend come first while lines stream).
    """
    yield page.head(title, types) + page.legend(types) + '\n<div class="lines">\n'
    counts: Counter[str] = Counter()
    lines = 0
    for result in results:
        lines += 1
        counts.update(e["type"] for e in result["entities"])
        marked = highlighted_line(result["text"], result["entities"], result.get("flagged", ()))
        yield f'<div class="line">{marked}</div>\n'
    by_type = ", ".join(f"{page.esc(t)} {counts[t]}" for t in sorted(counts))
    yield (
        f'</div>\n<p class="summary">{lines} lines, {sum(counts.values())} entities'
        f"{f' ({by_type})' if by_type else ''}</p>\n" + page.TAIL
    )
