"""Case views of a tokenised sentence: as written, lower-cased, upper-cased.

One home for what "the lowercased view" means, shared by training's case augmentation (``data.case_augment``)
and ``evaluate --case-views``. A view changes every token's characters and nothing else: the number of tokens,
and so every tag, stays as it was (``"Straße".upper()`` is ``"STRASSE"``: a token may change length).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

CaseView = Literal["cased", "lower", "upper"]
CASE_VIEWS: tuple[CaseView, ...] = ("cased", "lower", "upper")  # "cased": the tokens as written


def case_view(tokens: Sequence[str], view: CaseView) -> list[str]:
    """The tokens in ``view``."""
    if view == "lower":
        return [t.lower() for t in tokens]
    if view == "upper":
        return [t.upper() for t in tokens]
    if view == "cased":
        return list(tokens)
    raise ValueError(f"unknown case view {view!r}: expected one of {', '.join(CASE_VIEWS)}")
