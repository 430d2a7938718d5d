"""The report page's HTML: one self-contained document (inline CSS, images as data URIs, no script, no URL).

Every piece of text that comes from a run (tokens, entity types, paths) goes through ``esc``; the helpers
below take plain text and escape it themselves, so callers never build markup from user data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from ner_app.report.error_analysis import Span

# Entity highlight colours, cycled over the types in sorted order.
PALETTE = ("#ffd88a", "#9fd3ff", "#b8f0a8", "#f5b3e6", "#d4c4ff", "#ffc2a8", "#a8f0ea", "#e6e6a0")

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; background: #fff; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0; } caption { text-align: left; font-weight: bold; }
th, td { border: 1px solid #ccc; padding: .2em .6em; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; display: block; margin: .5em 0; }
.note { color: #555; font-size: .9em; }
.sentence { margin: .7em 0; padding: .3em .6em; border-left: 3px solid #ccc; }
.line { line-height: 2.1; } .who { display: inline-block; width: 6em; color: #555; font-size: .85em; }
mark { padding: .1em .25em; border-radius: 3px; border: 2px solid transparent; }
mark.bad { border-color: #d22; } mark sub { font-size: .65em; font-weight: bold; margin-left: .2em; }
"""


def esc(text: object) -> str:
    """Text for HTML element content or a quoted attribute value."""
    return escape(str(text), quote=True)


def image(uri: str, alt: str) -> str:
    """An ``<img>`` of an embedded PNG (anything but a data URI is refused: the page must stand alone)."""
    if not uri.startswith("data:image/png;base64,"):
        raise ValueError("the report embeds its images; expected a data:image/png;base64 URI")
    return f'<img src="{uri}" alt="{esc(alt)}">'


def cell(value: object) -> str:
    if isinstance(value, float):
        return f'<td class="n">{value:.2f}</td>'
    if isinstance(value, int):
        return f'<td class="n">{value}</td>'
    return f"<td>{esc(value)}</td>"


def table(header: Sequence[str], rows: Sequence[Sequence[object]], caption: str = "") -> str:
    """A table of text and numbers (floats shown with two decimals)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    title = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def paragraph(text: str, note: bool = False) -> str:
    return f'<p class="note">{esc(text)}</p>' if note else f"<p>{esc(text)}</p>"


def section(anchor: str, title: str, parts: Sequence[str]) -> str:
    """A titled section; ``parts`` are markup built by the helpers above."""
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>\n' + "\n".join(parts) + "\n</section>"


def highlighted(
    tokens: Sequence[str], marked: Sequence[tuple[Span, str]], type_index: Mapping[str, int]
) -> str:
    """The sentence with each span of ``marked`` = [(span, problem)] in its type's colour; a span with a
    non-empty problem (such as "wrong type") gets a red frame and the problem in its tooltip."""
    starts = {start: (kind, end, problem) for (kind, start, end), problem in marked}
    out, i = [], 0
    while i < len(tokens):
        if i not in starts:
            out.append(esc(tokens[i]))
            i += 1
            continue
        kind, end, problem = starts[i]
        words = " ".join(esc(t) for t in tokens[i : end + 1])
        tip = esc(f"{kind}: {problem}" if problem else kind)
        bad = " bad" if problem else ""
        out.append(
            f'<mark class="t{type_index.get(kind, 0)}{bad}" title="{tip}">{words}<sub>{esc(kind)}</sub></mark>'
        )
        i = end + 1
    return " ".join(out)


def page(title: str, sections: Sequence[str], types: Sequence[str]) -> str:
    """The whole document; ``types`` (in ``highlighted``'s index order) get the palette's colours."""
    colours = "".join(
        f"mark.t{i} {{ background: {PALETTE[i % len(PALETTE)]}; }}\n" for i in range(max(len(types), 1))
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}{colours}</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n" + "\n".join(sections) + "\n</body>\n</html>\n"
    )
