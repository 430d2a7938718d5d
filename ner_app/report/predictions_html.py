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
        parts += [page.esc(text[at:start]), page.mark(kind, page.esc(text[start:end]), title)]
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
        yield f'<div class="line">{highlighted_line(result["text"], result["entities"])}</div>\n'
    by_type = ", ".join(f"{page.esc(t)} {counts[t]}" for t in sorted(counts))
    yield (
        f'</div>\n<p class="summary">{lines} lines, {sum(counts.values())} entities'
        f"{f' ({by_type})' if by_type else ''}</p>\n" + page.TAIL
    )
