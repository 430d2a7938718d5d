"""``train --init-from``: a tiny run continued on data with an added entity type (real files, real Lightning).

It starts from the export's weights exactly, learns the new type to F1 = 1.0 on its training data, and its
metrics.json and report hold each old type's F1 on the old dev file before and after."""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ner_app.cli.commands import main
from ner_app.config.load import load_config
from ner_app.tagger.export import load_export
from ner_app.train.continued import OldDev, StartingPoint, continue_from
from ner_app.train.corpus import load_corpus
from ner_app.train.metrics import RunMetrics
from ner_app.train.run import build_spec, build_tagger, load_features
from tests.helpers import ROOT, TINY

pytestmark = pytest.mark.system  # trains tiny runs in a checkout: out of the fast lane

# Continued training data: the old types PER, ORG, LOC and a new one, PROD, in IOB2 (the old data is IOB1).
NEW_DATA = """\
-DOCSTART- O

Alice B-PER
Smith I-PER
bought O
an O
iPhone B-PROD
in O
Paris B-LOC
. O

Acme B-ORG
Corp I-ORG
sells O
the O
Walkman B-PROD
and O
the O
Game B-PROD
Boy I-PROD
. O

Dave B-PER
likes O
his O
Walkman B-PROD
. O

Carol B-PER
lost O
her O
iPhone B-PROD
in O
Berlin B-LOC
. O
"""


# docs/continue_training.md, run as written from a folder laid out like the checkout
OLD = "python -m ner_app train --config configs/tiny.yaml"
CONTINUE = (
    "python -m ner_app train --config configs/tiny.yaml --init-from runs/tiny/export output_dir=runs/tiny_prod "
    "data.dir=mine_prod data.previous_dev=tests/data/tiny_conll/valid.txt"
)


def run(command: str) -> int:
    return main(shlex.split(command)[3:])  # after "python -m ner_app"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder laid out like the checkout (pyproject.toml, configs/tiny.yaml, tests/data) where the tiny config
    was trained to F1 = 1.0 on tests/data/tiny_conll (PER, ORG, LOC, MISC), and the new data in mine_prod/."""
    root = tmp_path_factory.mktemp("checkout")
    (root / "pyproject.toml").write_text("", encoding="utf-8")
    (root / "configs").mkdir()
    shutil.copy(ROOT / "configs" / "tiny.yaml", root / "configs" / "tiny.yaml")
    for name in ("tiny_conll", "tiny_bilm"):
        shutil.copytree(TINY.parent / name, root / "tests" / "data" / name)
    (root / "mine_prod").mkdir()
    for name in ("train.txt", "valid.txt", "test.txt"):  # dev and test: the training sentences themselves
        (root / "mine_prod" / name).write_text(NEW_DATA, encoding="utf-8")
    threads = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # the commands as documented leave torch's threads as they are: one, in the tests
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(root)
            assert run(OLD) == 0
            yield root
    finally:
        torch.set_num_threads(threads)


def test_continued_tagger_starts_with_the_exports_weights(checkout: Path) -> None:
    overrides = ["data.dir=mine_prod", "model.init_from=runs/tiny/export"]
    cfg = load_config(checkout / "configs" / "tiny.yaml", overrides)
    corpus = load_corpus(cfg.data.dir, None, cfg.data.scheme)
    features, resources = load_features(cfg)
    start = StartingPoint.load(str(cfg.model.init_from))
    tagger, spec = continue_from(
        start,
        build_spec(cfg, corpus, features, None),
        lambda s: build_tagger(cfg, s, resources, corpus, None),
    )
    assert start.types == ("LOC", "MISC", "ORG", "PER")
    assert set(spec.tag_vocab.itos) == set(start.spec.tag_vocab.itos) | {
        "B-PROD",
        "I-PROD",
        "E-PROD",
        "S-PROD",
    }
    old, new = start.tagger.trained_state(), tagger.trained_state()
    old_tags, new_tags = start.spec.tag_vocab.itos, spec.tag_vocab.itos
    rows = [new_tags.index(t) for t in old_tags]
    assert torch.equal(new["output.weight"][rows], old["output.weight"])
    assert torch.equal(new["crf.transitions"][rows][:, rows], old["crf.transitions"])
    assert torch.equal(new["crf.start_transitions"][rows], old["crf.start_transitions"])
    old_words, new_words = start.spec.word_vocab.itos, spec.word_vocab.itos
    assert torch.equal(
        new["word_embed.weight"][[new_words.index(w) for w in old_words]], old["word_embed.weight"]
    )
    assert "iphone" in new_words and "walkman" in new_words
    assert torch.equal(new["lstm.0.weight_hh_l0"], old["lstm.0.weight_hh_l0"])
    assert torch.equal(
        new["elmo.scalar_mixes.0.scalar_parameters"], old["elmo.scalar_mixes.0.scalar_parameters"]
    )
    # the old model's own dev file: the continued tagger, before a step, tags its old types as the export does
    dev = OldDev.read(str(checkout / "tests" / "data" / "tiny_conll" / "valid.txt"), -1)
    assert dev.score(start.tagger, start.spec, 8).f1 == 100.0


def test_init_from_adds_a_type_and_reports_old_types_before_and_after(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.set_num_threads(1)
    assert run(CONTINUE) == 0  # --init-from is a path from the working directory (the checkout here)
    run_dir = checkout / "runs" / "tiny_prod"
    out = capsys.readouterr().out
    assert "Old types on" in out
    metrics = RunMetrics.read(run_dir / "metrics.json")
    assert metrics.dev.f1 == 100.0 and metrics.dev.per_type["PROD"].f1 == 100.0  # its training sentences
    previous = metrics.previous_dev
    assert previous is not None and previous.types == ("LOC", "MISC", "ORG", "PER")
    # before: the export on its own dev file, which is what the old run measured there
    old = RunMetrics.read(checkout / "runs" / "tiny" / "metrics.json")
    assert {t: s.f1 for t, s in previous.before.per_type.items()} == {
        t: s.f1 for t, s in old.dev.per_type.items()
    }
    assert set(previous.after.per_type) >= {"LOC", "ORG", "PER"}
    assert previous.file == str(checkout / "tests" / "data" / "tiny_conll" / "valid.txt")
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert saved["previous_dev"]["after"]["per_type"]["PER"]["f1"] == previous.after.per_type["PER"].f1
    # the report shows the table: every old type with its two F1 values
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    section = page[page.index('id="forgetting"') :]
    for t in previous.types:
        b, a = previous.before.per_type[t].f1, previous.after.per_type.get(t)
        assert (
            f'<td>{t}</td><td class="num">{b:.2f}</td><td class="num">{a.f1 if a else 0.0:.2f}</td>'
            in section
        )
    # the export of the continued run predicts the new type and still knows the old ones
    tagger, spec = load_export(run_dir / "export")
    assert {"S-PROD", "S-MISC", "B-PER"} <= set(spec.tag_vocab.itos)
    assert spec.source_scheme == "IOB2"  # predictions are written in the new data's scheme
    assert f"init_from: {checkout / 'runs' / 'tiny' / 'export'}" in (run_dir / "config.yaml").read_text()
