"""Character spans onto the tokenizer's tokens, under one of three policies, every change named in the audit.

A span whose edges fall on token edges maps to those tokens. Whitespace at its edges is trimmed first (tools
let a selection take the space after a word; that changes no token). A span with an edge inside a token
(``Sony`` marked in ``Sonys``, ``Germ`` in ``German``) cannot be tagged as marked:

- ``expand`` (the default) widens it to the whole tokens it touches: the entity stays in the training data,
  and is reported as moved;
- ``contract`` narrows it to the tokens wholly inside it, reported as cut (dropped when none is);
- ``strict`` drops it, reported as dropped.
"""

from __future__ import annotations

import bisect

from ner_app.text.annotations.model import CUT, DROPPED, MOVED, Audit, TextDocument, TokenDocument, TokenSpan
from ner_app.text.tokenizer import sentences, tokenize

ALIGN_MODES = ("expand", "contract", "strict")


def align(doc: TextDocument, mode: str, audit: Audit) -> TokenDocument:
    """``doc`` tokenised and sentence-split, its character spans turned into token spans."""
    if mode not in ALIGN_MODES:
        raise ValueError(f"unknown alignment {mode!r}: expected one of {', '.join(ALIGN_MODES)}")
    tokens = tokenize(doc.text)
    ranges: list[tuple[int, int]] = []
    for sentence in sentences(tokens):
        start = ranges[-1][1] if ranges else 0
        ranges.append((start, start + len(sentence)))
    starts = [t.start for t in tokens]
    ends = [t.end for t in tokens]
    text = doc.text
    spans: list[TokenSpan] = []
    for span in doc.spans:
        start, end = span.start, span.end
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        marked = text[span.start : span.end]
        if (start, end) != (span.start, span.end):
            audit.note("spans trimmed of whitespace at their edges")
        first = bisect.bisect_right(ends, start)  # the first token that ends after the span starts
        last = bisect.bisect_left(starts, end) - 1  # the last token that starts before the span ends
        if start == end or first > last:
            audit.report(span.where, DROPPED, marked, span.type, "no token in it")
            continue
        if starts[first] == start and ends[last] == end:
            spans.append(TokenSpan(first, last + 1, span.type, span.where))
            continue
        inside = f"an edge inside the tokens {text[starts[first] : ends[last]]!r}"
        if mode == "strict":
            audit.report(span.where, DROPPED, marked, span.type, f"{inside} (--align strict)")
        elif mode == "expand":
            audit.report(span.where, MOVED, marked, span.type, f"{inside}; expanded to them")
            spans.append(TokenSpan(first, last + 1, span.type, span.where))
        else:
            lo = first if starts[first] >= start else first + 1
            hi = last if ends[last] <= end else last - 1
            if lo > hi:
                audit.report(
                    span.where,
                    DROPPED,
                    marked,
                    span.type,
                    f"{inside}, none of them wholly in it (--align contract)",
                )
            else:
                audit.report(
                    span.where,
                    CUT,
                    marked,
                    span.type,
                    f"{inside}; contracted to {text[starts[lo] : ends[hi]]!r}",
                )
                spans.append(TokenSpan(lo, hi + 1, span.type, span.where))
    return TokenDocument(
        doc.where, [t.text for t in tokens], ranges, spans, doc.text, [(t.start, t.end) for t in tokens]
    )
