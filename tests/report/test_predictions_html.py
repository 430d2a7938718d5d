"""``predict --format html``: marked spans are the predicted entities, user text is escaped, a browser renders it."""

import contextlib
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.report.page import type_colours
from ner_app.report.predictions_html import highlighted_line, predictions_html

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"

HOSTILE = [
    '<script>document.body.setAttribute("data-pwned", "1")</script> Alice met Bob in Paris.',
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\"> Acme & Co said \"yes\" & 'no'.",
    "</div></mark></body> &amp; &lt;Paris&gt; <!-- x --> Berlin",
]
TEXTS = [
    "Alice Smith flew to Paris on Monday, said Bob.",
    "",
    "   two  spaces\tand a tab   ",
    "Zürich, São Paulo and 東京: Carol met Dave. 😀 Paris? Paris!",
    *HOSTILE,
    "Acme Corp. hired Mr. Jones in Berlin; U.S. officials didn't comment.",
]


class PageParser(HTMLParser):
    """Collects each ``div.line``'s text and its ``<mark>``s, every tag name, and every attribute name."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.marks: list[list[tuple[str, str]]] = []
        self.legend: list[str] = []
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self._in_line = self._in_legend = False
        self._mark: list[str] | None = None
        self._mark_type = ""

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        attrs = dict(attrs)
        if tag == "div" and attrs.get("class") == "line":
            self._in_line = True
            self.lines.append("")
            self.marks.append([])
        elif tag == "div" and attrs.get("class") == "legend":
            self._in_legend = True
        elif tag == "mark" and self._in_legend:
            self.legend.append(attrs["data-type"])
        elif tag == "mark" and self._in_line:
            self._mark, self._mark_type = [], attrs["data-type"]

    def handle_endtag(self, tag):
        if tag == "mark" and self._mark is not None:
            self.marks[-1].append((self._mark_type, "".join(self._mark)))
            self._mark = None
        elif tag == "div":
            self._in_line = self._in_legend = False

    def handle_data(self, data):
        if self._in_line:
            self.lines[-1] += data
            if self._mark is not None:
                self._mark.append(data)


def parse(page: str) -> PageParser:
    parser = PageParser()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """The export of a short tiny training run (the shipped tiny biLM)."""
    run = tmp_path_factory.mktemp("html") / "run"
    code = main(
        [
            "train",
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={run}",
            f"data.dir={TINY}",
            f"elmo.options={ROOT / 'tests/data/tiny_bilm/options.json'}",
            "trainer.max_epochs=8",
            f"elmo.weights={ROOT / 'tests/data/tiny_bilm/weights.hdf5'}",
            "elmo.cache_dir=null",
            "trainer.threads=1",
        ]
    )
    assert code == 0
    return run / "export"


def predict(export: Path, input_file: Path, fmt: str) -> str:
    """``python -m ner_app predict`` in this process (the command's own code path, without a new interpreter)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["predict", "--model", str(export), "--input", str(input_file), "--format", fmt])
    assert code == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def page(export) -> tuple[str, list[dict]]:
    """The html page of TEXTS and the JSON predictions of the same model on the same input."""
    source = export.parent / "input.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    predicted = [json.loads(line) for line in predict(export, source, "text").splitlines()]
    return predict(export, source, "html"), predicted


@pytest.mark.system
def test_marked_spans_are_the_predicted_entities(page):
    html, predicted = page
    parsed = parse(html)
    assert parsed.lines == TEXTS  # every line's text comes back exactly, escaping undone by the parser
    assert parsed.legend == ["LOC", "MISC", "ORG", "PER"]  # the model's types, with no entity needed
    found = 0
    for marks, result in zip(parsed.marks, predicted, strict=True):
        assert marks == [(e["type"], e["text"]) for e in result["entities"]]
        found += len(marks)
    assert found > 0, "the tiny model predicted no entity: the test would check nothing"
    summary = re.search(r'<p class="summary">(\d+) lines, (\d+) entities', html)
    assert summary is not None and summary.groups() == (str(len(TEXTS)), str(found))


@pytest.mark.system
def test_hostile_text_is_escaped(page):
    html, _ = page
    parsed = parse(html)
    assert parsed.tags <= {"html", "head", "meta", "title", "style", "body", "h1", "div", "mark", "p"}
    assert not {a for a in parsed.attributes if a.startswith("on")}
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert "&amp;amp;" in html and "&quot;yes&quot;" in html


def test_escaping_inside_an_entity_and_in_its_type():
    text = 'a <b>&"x"</b> c'
    start, end = text.index("<"), text.index(" c")
    entity = {"start": start, "end": end, "type": 'T"<', "text": text[start:end], "score": 0.5}
    page = "".join(predictions_html([{"text": text, "entities": [entity]}], ['T"<']))
    parsed = parse(page)
    assert parsed.lines == [text] and parsed.marks == [[('T"<', '<b>&"x"</b>')]]
    assert parsed.tags == {"html", "head", "meta", "title", "style", "body", "h1", "div", "mark", "p"}
    assert "</style>" in page and page.count("<style>") == 1  # the type's CSS rule cannot close <style>


def test_offsets_that_overlap_or_leave_the_line_are_refused():
    with pytest.raises(ValueError, match="overlaps"):
        highlighted_line("abcdef", [{"start": 0, "end": 3, "type": "A"}, {"start": 2, "end": 4, "type": "B"}])
    with pytest.raises(ValueError, match="leaves the line"):
        highlighted_line("abc", [{"start": 1, "end": 4, "type": "A"}])


def test_every_type_gets_its_own_colour():
    types = [f"T{i}" for i in range(12)] + ["PER", "LOC", "ORG", "MISC"]
    colours = type_colours(types)
    assert len({fill for fill, _ in colours.values()}) == len(types)
    assert type_colours(["PER"])["PER"] == colours["PER"]  # fixed, whatever else the model knows
    # types a report shows beyond the model's (gold types it never learnt) change no model type's colour
    with_extra = type_colours(types, extra=["A0", "ZZ", "T3"])
    assert {t: with_extra[t] for t in types} == colours and len(set(with_extra.values())) == len(types) + 2


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip(
            "chromium is not on PATH: rendering the page needs a headless browser (apt-get install chromium)"
        )
    return found


def _run_chromium(tmp_path: Path, *args: str) -> str:
    result = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.system
def test_chromium_renders_each_type_in_its_colour_and_runs_no_script(page, tmp_path):
    html, _ = page
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    dom = _run_chromium(tmp_path, "--dump-dom", path.as_uri())
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None and "pwned" not in body.group(0)  # neither <script> nor onerror ran
    png = tmp_path / "shot.png"
    _run_chromium(tmp_path, f"--screenshot={png}", "--window-size=1000,800", path.as_uri())
    from PIL import Image

    pixels = Image.open(png).convert("RGB").getdata()
    counts: dict[tuple[int, int, int], int] = {}
    for pixel in pixels:
        counts[pixel] = counts.get(pixel, 0) + 1
    for kind, (fill, _) in type_colours(["LOC", "MISC", "ORG", "PER"]).items():
        rgb = tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
        assert counts.get(rgb, 0) > 100, f"{kind}'s colour {fill} is not on the screenshot"


def test_bidirectional_controls_are_shown_not_obeyed():
    """A right-to-left override inside a token would reorder what the page shows; it is shown as its code."""
    from ner_app.report.page import esc

    assert esc("abc\u202edef") == "abc[U+202E]def"
    assert esc("x\u2067y\u2069<") == "x[U+2067]y[U+2069]&lt;"
    assert "\u202e" not in "".join(predictions_html([{"text": "Paris\u202e.", "entities": []}], []))


def test_alternatives_and_flagged_tokens_are_marked_and_escaped():
    text = "Bob <i>x</i> met Acme"
    bob = {"start": 0, "end": 3, "type": "PER", "text": "Bob", "score": 0.61}
    bob["alternatives"] = [{"start": 0, "end": 12, "type": "ORG", "text": text[:12], "score": 0.3}]
    acme = {"start": 17, "end": 21, "type": "ORG", "text": "Acme", "score": 0.9, "alternatives": []}
    reading = {"start": 4, "end": 12, "type": "MISC", "text": "<i>x</i>", "score": 0.45}
    flag = {"start": 4, "end": 12, "text": "<i>x</i>", "o_score": 0.52, "reading": reading}
    page = "".join(
        predictions_html([{"text": text, "entities": [bob, acme], "flagged": [flag]}], ["PER", "ORG"])
    )
    parsed = parse(page)
    assert "<i>" not in page and parsed.tags <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "div",
    } | {
        "mark",
        "p",
        "sup",
        "span",
    }
    assert '<sup class="alts">or ORG 0.30</sup>' in page and '<sup class="alts">or none</sup>' in page
    assert 'title="PER 0.61; or ORG 0.30: Bob &lt;i&gt;x&lt;/i&gt;"' in page
    assert (
        '<span class="flag" title="O 0.52; maybe MISC 0.45: &lt;i&gt;x&lt;/i&gt;">&lt;i&gt;x&lt;/i&gt;</span>'
        in page
    )
    with pytest.raises(ValueError, match="overlaps"):
        highlighted_line(text, [bob], [{**flag, "start": 2}])
