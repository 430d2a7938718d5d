"""CoNLL-2003 (Reuters, Penn-Treebank-style) tokenisation of raw text, with exact character offsets.

``tokenize(text)`` returns :class:`Token` objects whose ``text`` is always ``text[start:end]``: tokens are
slices of the input, never rewritten (no quote normalisation), in increasing, non-overlapping order.
``sentences(text_or_tokens, max_tokens=250)`` groups tokens into sentences of at most ``max_tokens``.

Rules, in order of precedence:

1. Whitespace (any Unicode whitespace, plus the zero-width space U+200B and the BOM U+FEFF) separates
   tokens and is never part of one.
2. URLs (``http://``, ``https://``, ``ftp://``, ``www.``), e-mail addresses (``a@b.com``) and bare domains
   ending in ``.com .org .net .edu .gov`` are one token; trailing punctuation is not part of a URL.
3. An emoji is its own token, together with its skin-tone / variation-selector modifiers and any
   zero-width-joiner sequence; a pair of regional indicators (a flag) is one token.
4. Abbreviations keep their period: dotted acronyms (``U.S.``, ``U.K.``, ``a.m.``, ``e.g.``), the fixed
   list in :data:`ABBREVIATIONS` (plus upper-case ``MR.``, ``INC.``, ``CORP.``...), ``No.`` before a number
   and single capital initials (``J.``). The period stays on the abbreviation even at the end of the text
   (CoNLL writes ``Corp.`` at sentence end), and is not split off as a separate ``.`` token.
5. Clitics split the Treebank way: ``'s 'S 're 've 'll 'd 'm`` (any case) and ``n't`` (``don't`` ->
   ``do n't``, ``can't`` -> ``ca n't``, ``U.S.'s`` -> ``U.S. 's``); the curly apostrophe ``’`` works too.
   Other apostrophes inside a word stay (``O'Neill``, ``rock'n'roll``); a possessive apostrophe after a
   plural (``players'``) is split off as ``'``.
6. Words are runs of Unicode letters, digits, ``_`` and combining marks (``Zürich``, ``São``, ``東京``),
   joined by internal hyphens (``bio-identical``, ``far-reaching``, ``1-0``) and ``&`` (``AT&T``).
   Numbers keep internal ``. , : / -`` between digits (``3.5``, ``1,000``, ``10:30``, ``1/2``,
   ``1996-08-22``) and a leading ``+``/``-`` sign directly before a digit (``-5``).
7. ``#tag`` and ``@handle`` stay attached.
8. Everything else is split off one character per token: the punctuation . , ; : ! ? ( ) [ ] { } " ' `
   and the quotes “ ” ‘ ’ « », the symbols $ % & (``&`` outside a word), / and single dashes (- – —).
   Runs Treebank keeps together stay one token: two or more periods (``...``), two or more hyphens
   (``--``), and the ASCII double quotes made of two backticks or two apostrophes.

Known trade-offs: a capital letter before a period is read as an initial even at a sentence end
(``Plan A.`` -> ``Plan A.``), and ``No.`` keeps its period only before a number (``No. 5`` but ``No .``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ABBREVIATIONS", "Token", "sentences", "tokenize"]

ABBREVIATIONS: tuple[str, ...] = (
    "Mr",
    "Mrs",
    "Ms",
    "Dr",
    "Prof",
    "St",
    "Jr",
    "Sr",
    "Inc",
    "Corp",
    "Co",
    "Ltd",
    "Bros",
    "Gen",
    "Gov",
    "Sen",
    "Rep",
    "Lt",
    "Col",
    "Sgt",
    "Capt",
    "Mt",
    "vs",
    "etc",
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "Aug",
    "Sep",
    "Sept",
    "Oct",
    "Nov",
    "Dec",
    "Mon",
    "Tue",
    "Wed",
    "Thu",
    "Fri",
    "Sat",
    "Sun",
)
"""Words that keep a following period (``No`` is handled apart: only before a number)."""

# Reuters headlines are in capitals ("ACME CORP."); upper-case only these, not "MAR."/"SUN." (real words).
_UPPER_TOO = ("Mr", "Mrs", "Ms", "Dr", "Jr", "Sr", "Inc", "Corp", "Co", "Ltd", "Bros")

# Closing punctuation that may end a URL in running text but is not part of it.
_URL_TRAIL = r".,;:!?'\"()\[\]{}<>`“”‘’«»"
_APOS = "['’]"
_CLITIC = "(?:[sSdDmM]|[rR][eE]|[vV][eE]|[lL][lL])"
# Pictographs and symbols that can carry emoji modifiers; others fall back to one-character tokens.
_EMOJI = (
    "[\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf\u2934\u2935"
    "\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff]"
)
_EMOJI_MOD = "[\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]"
_SEPARATORS = "\u200b\ufeff"


@dataclass(frozen=True, slots=True)
class Token:
    """A token: ``text`` equals ``source[start:end]`` of the string it came from."""

    text: str
    start: int
    end: int


def _char_class(code_points: list[int]) -> str:
    """The body of a regex character class (``a-z...``) for sorted code points."""
    parts: list[str] = []
    i = 0
    while i < len(code_points):
        j = i
        while j + 1 < len(code_points) and code_points[j + 1] == code_points[j] + 1:
            j += 1
        parts.append(f"\\u{code_points[i]:04x}" + (f"-\\u{code_points[j]:04x}" if j > i else ""))
        i = j + 1
    return "".join(parts)


@functools.cache
def _pattern() -> re.Pattern[str]:
    """Compile the token regex once, on first use (building the Unicode classes takes ~20-50 ms)."""
    marks: list[int] = []
    upper: list[int] = []
    # Python's \w is str.isalnum() + "_": it misses combining marks (decomposed "é", Indic vowel signs),
    # and re has no \p{Lu}, so both classes are built from the Basic Multilingual Plane.
    for cp in range(0x10000):
        ch = chr(cp)
        if unicodedata.category(ch)[0] == "M":
            marks.append(cp)
        elif ch.isupper():
            upper.append(cp)
    w_body = f"\\w{_char_class(marks)}"
    w = f"[{w_body}]"
    abbrevs = "|".join(sorted({*ABBREVIATIONS, *(a.upper() for a in _UPPER_TOO)}))
    alternatives = [
        # Fast path for the common case, a plain letter/digit run ended by a space or simple punctuation:
        # no other rule can apply to it, and skipping the rest makes tokenising ~2x faster.
        r"[^\W_]+(?=\s|\Z|[;!?\")\]}]|,(?!\d))",
        r"[,;:!?()\[\]{}\"“”«»$%&/]",  # likewise punctuation that starts no longer token
        # URLs and e-mails first so that their dots, slashes and @ are not split.
        rf"(?:(?:https?|ftp)://|www\.)[^\s{_SEPARATORS}]*[^\s{_SEPARATORS}{_URL_TRAIL}]",
        # The look-behind makes every attempt start a fresh run, which keeps long runs linear.
        r"(?<![\w.+-])[\w.+-]+@\w[\w-]*(?:\.[\w-]+)+",
        rf"(?<![\w.]){w}+(?:-{w}+)*(?:\.{w}+(?:-{w}+)*)*\.(?:com|org|net|edu|gov)(?!{w})",
        "[\U0001f1e6-\U0001f1ff]{2}",
        rf"{_EMOJI}{_EMOJI_MOD}*(?:\u200d{_EMOJI}{_EMOJI_MOD}*)*",
        # Abbreviations: dotted acronyms, the fixed list, "No." before a number, capital initials.
        rf"(?<!{w})(?:[^\W\d_]\.){{2,}}",
        rf"(?<!{w})(?:{abbrevs})\.(?!\.)",
        rf"(?<!{w})No\.(?=\s*\d)",
        rf"(?<!{w})[{_char_class(upper)}]\.(?!\.)",
        # "don't" -> "do" + "n't": the stem stops right before n't.
        rf"{w}+?(?=[nN]{_APOS}[tT](?!{w}))",
        rf"[nN]{_APOS}[tT](?!{w})",
        rf"(?<=[{w_body}.]){_APOS}{_CLITIC}(?!{w})",
        # Words and numbers: internal hyphens, & and non-clitic apostrophes; . , : / only between digits.
        rf"(?:(?<![\w.])[+\-\u2212](?=\d))?{w}+"
        rf"(?:(?:[-\u2010\u2011&]|(?<=\d)[.,:/](?=\d)|{_APOS}(?!(?:{_CLITIC}|[tT])(?!{w}))){w}+)*",
        rf"(?<!{w})[#@]{w}+",
        r"\.{2,}|-{2,}|``|''",
        rf"[^\s{_SEPARATORS}]",
    ]
    return re.compile("|".join(alternatives))


def tokenize(text: str) -> list[Token]:
    """Split raw text into CoNLL-2003-style tokens with exact character offsets (see the module rules)."""
    return [Token(m.group(), *m.span()) for m in _pattern().finditer(text)]


_TERMINALS = frozenset({".", "!", "?"})
# Closing quotes and brackets directly after a terminal belong to the sentence it ends ('said "no."').
_CLOSERS = frozenset({'"', "'", "''", "”", "’", "»", ")", "]", "}"})
_OPENERS = ('"', "'", "`", "“", "‘", "«")


def _starts_sentence(token: Token) -> bool:
    return token.text[0].isupper() or token.text.startswith(_OPENERS)


def sentences(text: str | Sequence[Token], *, max_tokens: int = 250) -> list[list[Token]]:
    """Split text (or its tokens) into sentences, each cut into pieces of at most ``max_tokens``.

    A sentence ends at a ``.``, ``!`` or ``?`` token (abbreviations such as ``Mr.`` are single tokens, so
    they never end one), plus any closing quotes/brackets glued to it, when the next token starts with an
    upper-case letter or a quote. Long sentences are cut into consecutive pieces so that a line of thousands
    of tokens never reaches the biLM in one piece.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    tokens = tokenize(text) if isinstance(text, str) else list(text)
    found: list[list[Token]] = []
    start, i, n = 0, 0, len(tokens)
    while i < n:
        i += 1
        if tokens[i - 1].text not in _TERMINALS:
            continue
        while i < n and tokens[i].text in _CLOSERS and tokens[i].start == tokens[i - 1].end:
            i += 1
        if i < n and _starts_sentence(tokens[i]):
            found.append(tokens[start:i])
            start = i
    if start < n:
        found.append(tokens[start:])
    return [s[k : k + max_tokens] for s in found for k in range(0, len(s), max_tokens)]
