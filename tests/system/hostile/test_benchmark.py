"""Hostile and careless input to ``benchmark speed``: a size that would grow memory without bound is one
``error:`` line before anything is allocated, and one timed batch gives no interval rather than a zero-width one."""

from __future__ import annotations

import pytest

from ner_app.cli.commands import main
from tests.helpers import one_error_line


def _text(tmp_path):  # noqa: ANN001, ANN202
    text = tmp_path / "news.txt"
    text.write_text(
        "Sony hired Bob in Paris.\nAcme Corp is in Berlin.\nIt rained.\nBob left.\n", encoding="utf-8"
    )
    return text


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            ["--batch-size", "100000000"],
            "--batch-size 100,000,000: a batch of this input (4 sentences, 18 words, cycled) holds up to "
            "450,000,000 words, more than the 1,048,576 a timed batch may hold",
        ),
        (["--batches", "1000000000"], "--batches: expected an integer in [1, 10,000], found 1,000,000,000"),
        (["--warmup", "1000000000"], "--warmup: expected an integer in [0, 10,000], found 1,000,000,000"),
    ],
    ids=["batch-size", "batches", "warmup"],
)
def test_sizes_beyond_the_input_are_one_line(trained, tmp_path, capsys, extra, expected):  # noqa: ANN001
    argv = ["benchmark", "speed", "--model", str(trained / "export"), "--input", str(_text(tmp_path)), *extra]
    assert main(argv) == 2
    one_error_line(capsys, expected)


def test_one_timed_batch_has_no_interval(trained, tmp_path, capsys):  # noqa: ANN001
    argv = ["benchmark", "speed", "--model", str(trained / "export"), "--input", str(_text(tmp_path))]
    assert main([*argv, "--batches", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "no confidence interval (one batch; --batches 2 or more gives one) over 1 batches" in out
    assert "95% CI" not in out
