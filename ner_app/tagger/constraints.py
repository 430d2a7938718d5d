"""Which tag transitions a tagging scheme allows, as boolean masks for the CRF.

A tag is ``"O"`` or ``"<prefix>-<type>"`` such as ``"B-PER"``. The masks say which tags may start a sentence,
which tag may follow which, and which may end a sentence; the CRF gives every other transition a large
negative score so that Viterbi never outputs a malformed entity.
"""

from __future__ import annotations

import torch

# Prefixes each scheme knows; IOB2 is called "BIO" here.
SCHEME_PREFIXES: dict[str, frozenset[str]] = {
    "BIO": frozenset("BI"),
    "IOB1": frozenset("BI"),
    "BIOES": frozenset("BIES"),
}


def _split(tag: str, scheme: str) -> tuple[str, str]:
    """``"B-PER"`` -> ``("B", "PER")``, ``"O"`` -> ``("O", "")``; ValueError if the scheme has no such tag."""
    if tag == "O":
        return "O", ""
    prefix, sep, entity = tag.partition("-")
    if not sep or not entity or prefix not in SCHEME_PREFIXES[scheme]:
        allowed = ", ".join(f"{p}-<type>" for p in sorted(SCHEME_PREFIXES[scheme]))
        raise ValueError(f"tag {tag!r} does not fit scheme {scheme!r}: expected 'O' or one of {allowed}")
    return prefix, entity


def _bio(prev: tuple[str, str] | None, cur: tuple[str, str] | None) -> bool:
    """IOB2: an I-X continues a B-X or I-X; ``None`` stands for the sentence boundary."""
    if cur is not None and cur[0] == "I":
        return prev is not None and prev[0] in "BI" and prev[1] == cur[1]
    return True


def _iob1(prev: tuple[str, str] | None, cur: tuple[str, str] | None) -> bool:
    """IOB1: I-X may open an entity; B-X only separates two adjacent entities of the same type X."""
    if cur is not None and cur[0] == "B":
        return prev is not None and prev[0] in "BI" and prev[1] == cur[1]
    return True


def _bioes(prev: tuple[str, str] | None, cur: tuple[str, str] | None) -> bool:
    """BIOES: B-X and I-X must be continued by I-X or E-X; the others are followed by O, B-* or S-*."""
    prev_open = prev is not None and prev[0] in "BI"  # inside an unfinished entity
    if cur is None:
        return not prev_open
    if cur[0] in "IE":
        return prev is not None and prev_open and prev[1] == cur[1]
    return not prev_open


_RULES = {"BIO": _bio, "IOB1": _iob1, "BIOES": _bioes}


def allowed_transitions(tags: list[str], scheme: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bool masks ``(start (K,), trans (K, K), end (K,))`` of a scheme; ``trans[i, j]``: tag j may follow i.

    ``scheme`` is ``"BIO"`` (IOB2), ``"IOB1"`` or ``"BIOES"``. ValueError for an unknown scheme or a tag that
    the scheme does not have.
    """
    if scheme not in _RULES:
        raise ValueError(f"unknown tag scheme {scheme!r}: expected one of {', '.join(sorted(_RULES))}")
    rule = _RULES[scheme]
    parts = [_split(tag, scheme) for tag in tags]
    start = torch.tensor([rule(None, p) for p in parts], dtype=torch.bool)
    end = torch.tensor([rule(p, None) for p in parts], dtype=torch.bool)
    trans = torch.tensor([[rule(p, q) for q in parts] for p in parts], dtype=torch.bool).reshape(
        len(parts), len(parts)
    )
    return start, trans, end
