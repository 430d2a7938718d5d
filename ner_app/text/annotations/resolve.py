"""The last stage of every conversion: label map, type whitelist, overlaps, sentences and tags.

Overlapping entities cannot share a tag sequence. ``longest`` keeps the span with more tokens (the earlier
one in the file on a tie), ``first`` the earlier one in the file, ``error`` stops with both named. Identical
spans (same tokens, same type) are one entity. A sentence boundary of the splitter that falls inside a kept
entity is removed, so no entity is cut in two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ner_app.text.annotations.model import (
    DROPPED,
    LEFT_OUT,
    AnnotationFormatError,
    Audit,
    TokenDocument,
    TokenSpan,
)
from ner_app.text.tags import UNKNOWN, Span, from_entities, known_entities, split_tag

OVERLAP_MODES = ("longest", "first", "error")


@dataclass(frozen=True)
class Policy:
    """How spans are mapped, filtered and kept: ``labels`` renames types (before ``types`` is applied),
    ``types`` (when not None) is the whitelist, ``overlap`` one of ``OVERLAP_MODES``."""

    labels: Mapping[str, str]
    types: frozenset[str] | None
    overlap: str = "longest"


def _shown(doc: TokenDocument, span: TokenSpan) -> str:
    if doc.text is not None and doc.offsets is not None:
        return doc.text[doc.offsets[span.start][0] : doc.offsets[span.end - 1][1]]
    return " ".join(doc.tokens[span.start : span.end])


def entity_type(kind: str, where: str) -> str:
    """``kind`` when it can be an entity type (one word of printable characters, not O or -); one error
    naming ``where`` otherwise (a terminal escape in a type would reach every message and report)."""
    if kind.split() != [kind] or kind in ("O", UNKNOWN) or not kind.isprintable():
        # a control character is shown escaped, never echoed to the terminal
        rename = f"; rename it with --labels '{kind}=NEW'" if kind.isprintable() else ""
        raise AnnotationFormatError(
            f"{where}: label {kind[:40]!r} is not an entity type (expected a name without spaces, not O, of "
            f"printable characters){rename}"
        )
    return kind


def retag(tags: Sequence[str], scheme: str, policy: Policy, where: str) -> tuple[list[str], list[Span]]:
    """A token format's own tags (``-`` where not annotated) with ``policy``'s renames and whitelist applied tag
    by tag, the scheme and the unknown tags kept; and the entities the whitelist left out (their new types)."""
    left_out = [
        (new, start, end)
        for kind, start, end in known_entities(tags, scheme)
        if policy.types is not None and (new := policy.labels.get(kind, kind)) not in policy.types
    ]
    out: list[str] = []
    previous = ("", "")  # the last tag's (old, new) type
    for tag in tags:
        if tag in ("O", UNKNOWN):
            out.append(tag)
            previous = ("", "")
            continue
        prefix, old = split_tag(tag)
        new = entity_type(policy.labels.get(old, old), where)
        if policy.types is not None and new not in policy.types:
            out.append("O")
            previous = ("", "")
            continue
        if scheme == "IOB1" and prefix == "I" and previous[1] == new and previous[0] != old:
            prefix = "B"  # two entities that a rename made adjacent and alike stay two
        out.append(f"{prefix}-{new}")
        previous = (old, new)
    return out, left_out


def keep_spans(doc: TokenDocument, policy: Policy, audit: Audit) -> list[TokenSpan]:
    """The spans of ``doc`` that go into its tags, sorted; every other one named in ``audit``."""
    candidates: list[TokenSpan] = []
    seen: set[tuple[int, int, str]] = set()
    for span in doc.spans:
        kind = entity_type(policy.labels.get(span.type, span.type), span.where)
        if policy.types is not None and kind not in policy.types:  # the user's choice: named, not a change
            audit.report(span.where, LEFT_OUT, _shown(doc, span), kind, "its type is not among --types")
            continue
        key = (span.start, span.end, kind)
        if key in seen:
            audit.note("identical spans merged")
            continue
        seen.add(key)
        candidates.append(TokenSpan(span.start, span.end, kind, span.where))
    order = list(range(len(candidates)))
    if policy.overlap == "longest":
        order.sort(key=lambda i: (candidates[i].start - candidates[i].end, i))
    kept: list[TokenSpan] = []
    owner: list[TokenSpan | None] = [None] * len(doc.tokens)  # the kept span on each token
    for i in order:
        span = candidates[i]
        clash = next((k for k in owner[span.start : span.end] if k is not None), None)
        if clash is None:
            kept.append(span)
            owner[span.start : span.end] = [span] * (span.end - span.start)
            continue
        other = f"{_shown(doc, clash)!r} ({clash.type}, {clash.where})"
        if policy.overlap == "error":
            raise AnnotationFormatError(
                f"{span.where}: {_shown(doc, span)!r} ({span.type}) overlaps {other}; one tag sequence holds one "
                "of them (--overlap longest or first chooses)"
            )
        audit.report(
            span.where,
            DROPPED,
            _shown(doc, span),
            span.type,
            f"overlaps {other}, kept (--overlap {policy.overlap})",
        )
    return sorted(kept, key=lambda s: s.start)


def sentence_ranges(doc: TokenDocument, spans: Sequence[TokenSpan]) -> list[tuple[int, int]]:
    """The sentences of ``doc``, joined where a boundary falls inside an entity."""
    inside = {b for s in spans for b in range(s.start + 1, s.end)}
    merged: list[tuple[int, int]] = []
    for start, end in doc.sentences:
        if merged and start in inside:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def tag_sentences(
    doc: TokenDocument, spans: Sequence[TokenSpan], scheme: str, outside_unknown: bool = False
) -> list[tuple[list[str], list[str]]]:
    """``(tokens, tags)`` of each sentence of ``doc`` with ``spans`` (sorted, not overlapping) in ``scheme``;
    with ``outside_unknown`` a token outside every span is tagged ``UNKNOWN`` (not annotated), not O."""
    out: list[tuple[list[str], list[str]]] = []
    at = 0  # spans are sorted: each sentence takes the next ones
    for start, end in sentence_ranges(doc, spans):
        local = []
        while at < len(spans) and spans[at].start < end:
            local.append((spans[at].type, spans[at].start - start, spans[at].end - start))
            at += 1
        tags = from_entities(local, end - start, scheme)
        if outside_unknown:
            inside = {i for _, a, b in local for i in range(a, b)}
            tags = [t if i in inside else UNKNOWN for i, t in enumerate(tags)]
        out.append((doc.tokens[start:end], tags))
    return out
