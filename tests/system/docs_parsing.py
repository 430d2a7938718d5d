"""Reading the docs' markdown: shell commands of bash/sh blocks, headings' anchors, prose without code."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Command:
    page: str  # path relative to the repository root
    line: int  # 1-based line where the command starts
    command: str  # whitespace normalised, without the trailing comment
    comment: str  # the trailing comment without '#', or ''

    @property
    def long_job(self) -> bool:
        return self.comment.startswith("long job")


def code_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """(language, 1-based line of the first code line, lines) of every fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = re.match(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)", lines[i])
        if not opening:
            i += 1
            continue
        fence, language = opening.group(1), opening.group(2).lower()
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and not lines[end].strip().strip(fence[0])
        ):
            end += 1
        yield language, i + 2, lines[i + 1 : end]
        i = end + 1


def split_comment(line: str) -> tuple[str, str]:
    """Split a shell line into (code, comment) at the first '#' outside quotes that starts a word."""
    quote = ""
    escaped = False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1 :].strip()
    return line, ""


def commands_in(text: str, page: str) -> list[Command]:
    """Every command of the bash/sh blocks of one markdown text."""
    found = []
    for language, first, lines in code_blocks(text):
        if language not in ("bash", "sh"):
            continue
        i = 0
        while i < len(lines):
            start, logical = i, lines[i]
            while logical.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                logical = logical.rstrip()[:-1] + " " + lines[i]
            i += 1
            code, comment = split_comment(logical)
            if code.strip():
                found.append(Command(page, first + start, " ".join(code.split()), comment))
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented() -> list[Command]:
    return [c for p in pages() for c in commands_in(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(text: str) -> str:
    """The text without the contents of its code blocks (a '#' line there is no heading, a link no link)."""
    for _, _, lines in code_blocks(text):
        text = text.replace("\n".join(lines), "")
    return text


def anchors(path: Path) -> set[str]:
    text = prose(path.read_text(encoding="utf-8"))
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.MULTILINE)}
