"""``predict --input FOLDER`` (or a pattern) with the shipped tagger: each output is what ``predict --input FILE``
writes for that file; a re-run skips what is done, an interrupted run resumes (a real SIGKILL), shards add up
to the whole, workers write what one process writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.files import STALE_AFTER_S
from ner_app.jobs.folder_outputs import MANIFEST
from tests.helpers import ROOT

pytestmark = pytest.mark.system  # loads the shipped tagger's GloVe rows, runs predict many times

TEXTS = {
    "news.txt": "Angela Merkel met Emmanuel Macron in Berlin.\nAcme Corp hired Bob Jones.\n",
    "a/one.txt": "EU rejects German call to boycott British lamb.\n\nPeter Blackburn\n",
    "a/b/two.md": "Japan began the defence of their Asian Cup title.\n",
    "a/b/empty.txt": "",
    "c/three.txt": "Alice Smith flew from London to Paris on Monday.\r\nNo entity here\n",
}


def folder(root: Path, texts: dict[str, str] = TEXTS) -> Path:
    for name, text in texts.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode("utf-8"))
    (root / ".hidden.txt").write_text("Hidden Person\n")
    return root


def files_under(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` (but the manifest and the output-policy markers) -> its bytes."""
    found = {}
    for path in sorted(out.rglob("*")):
        relative = path.relative_to(out).as_posix()
        if path.is_file() and not path.name.startswith("."):
            found[relative] = path.read_bytes()
    return found


def predict(*args: str) -> int:
    return main(["predict", "--threads", "1", *args])


@pytest.mark.parametrize("fmt", ["jsonl", "conll", "html", "labelstudio", "brat"])
def test_each_output_is_what_the_file_alone_gives(tmp_path: Path, monkeypatch, capsys, fmt: str) -> None:
    source = folder(tmp_path / "in")
    out = tmp_path / "out"
    assert predict("--input", str(source), "--output", str(out), "--format", fmt) == 0
    capsys.readouterr()
    alone = tmp_path / "alone"
    monkeypatch.chdir(source)  # a file alone named by its relative path: the same name in html's title
    for name in TEXTS:
        target = alone / (name + (".brat" if fmt == "brat" else ".out"))
        assert predict("--input", name, "--format", fmt, "--output", str(target)) == 0
    got = files_under(out)
    suffix = {"jsonl": ".jsonl", "conll": ".conll", "html": ".html", "labelstudio": ".json", "brat": ".brat"}[
        fmt
    ]
    want = {k.replace(".out", suffix): v for k, v in files_under(alone).items()}
    assert got == want and len(got) >= len(TEXTS)
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["format"] == fmt and manifest["model"].startswith("conll2003-")
    if fmt == "jsonl":
        assert b'"type": "PER"' in got["news.txt.jsonl"]  # the shipped tagger finds entities


def test_one_jsonl_names_each_file(tmp_path: Path, capsys) -> None:
    source = folder(tmp_path / "in")
    assert predict("--input", str(source), "--output", str(tmp_path / "all.jsonl")) == 0
    written = (tmp_path / "all.jsonl").read_text(encoding="utf-8")
    assert predict("--input", str(source)) == 0
    assert capsys.readouterr().out == written  # without --output: the same on standard output
    assert predict("--input", str(source), "--output", str(tmp_path / "out")) == 0
    objects = [json.loads(line) for line in written.splitlines()]
    assert [o["file"] for o in objects] == [
        "a/b/two.md", "a/one.txt", "a/one.txt", "a/one.txt", "c/three.txt", "c/three.txt", "news.txt", "news.txt"
    ]  # fmt: skip
    for name in {o["file"] for o in objects}:
        alone = [json.loads(line) for line in (tmp_path / "out" / f"{name}.jsonl").read_text().splitlines()]
        assert [{k: v for k, v in o.items() if k != "file"} for o in objects if o["file"] == name] == alone
    pattern = str(source / "**" / "*.txt")
    assert predict("--input", pattern, "--output", str(tmp_path / "txt.jsonl")) == 0
    files = {json.loads(line)["file"] for line in (tmp_path / "txt.jsonl").read_text().splitlines()}
    assert files == {"a/one.txt", "c/three.txt", "news.txt"}  # a/b/empty.txt has no lines


def test_a_rerun_skips_what_is_done_and_tags_what_is_missing(tmp_path: Path, capsys) -> None:
    source, out = folder(tmp_path / "in"), tmp_path / "out"
    assert predict("--input", str(source), "--output", str(out)) == 0
    first = files_under(out)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.jsonl")}
    capsys.readouterr()
    assert predict("--input", str(source), "--output", str(out)) == 0
    assert "tagged 0 files (0 lines, 0 words)" in capsys.readouterr().err
    (out / "a" / "one.txt.jsonl").unlink()
    assert predict("--input", str(source), "--output", str(out)) == 0
    err = capsys.readouterr().err
    assert "tagged 1 files (3 lines, 10 words)" in err and "; 4 already done; outputs in" in err
    assert files_under(out) == first
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if p.name != "one.txt.jsonl")
    # other options: one line, nothing touched; --overwrite tags every file again under a new manifest
    assert predict("--input", str(source), "--output", str(out), "--min-score", "0.99") == 2
    assert "holds outputs of another model or other options (--min-score 0.0 there, 0.99 now)" in (
        capsys.readouterr().err
    )
    assert files_under(out) == first
    assert predict("--input", str(source), "--output", str(out), "--min-score", "0.99", "--overwrite") == 0
    assert json.loads((out / MANIFEST).read_text())["min_score"] == 0.99
    assert files_under(out) != first and set(files_under(out)) == set(first)


@pytest.mark.slow  # three sharded runs and one whole: 6 s
def test_shards_add_up_to_the_whole_run(tmp_path: Path) -> None:
    texts = {f"d{i % 4}/f{i}.txt": f"Bob Jones {i} met Alice Smith in Paris.\n" for i in range(24)}
    source = folder(tmp_path / "in", texts)
    assert predict("--input", str(source), "--output", str(tmp_path / "whole")) == 0
    whole = files_under(tmp_path / "whole")
    shared, apart = tmp_path / "shared", {}
    for i in (1, 2, 3):  # three "machines": into one folder, and each into its own
        assert predict("--input", str(source), "--output", str(shared), "--shard", f"{i}/3") == 0
        own = tmp_path / f"shard{i}"
        assert predict("--input", str(source), "--output", str(own), "--shard", f"{i}/3") == 0
        part = files_under(own)
        assert part and not set(part) & set(apart)  # every shard has files, no file is in two
        apart.update(part)
    assert files_under(shared) == whole == apart
    combined = []
    for i in (1, 2, 3):
        assert (
            predict("--input", str(source), "--output", str(tmp_path / f"s{i}.jsonl"), "--shard", f"{i}/3")
            == 0
        )
        combined += (tmp_path / f"s{i}.jsonl").read_text().splitlines()
    assert predict("--input", str(source), "--output", str(tmp_path / "all.jsonl")) == 0
    by_file = sorted(combined, key=lambda line: json.loads(line)["file"])
    assert by_file == (tmp_path / "all.jsonl").read_text().splitlines()


@pytest.mark.slow  # starts the workers' fork server three times: 16 s
def test_workers_write_what_one_process_writes(tmp_path: Path) -> None:
    texts = {
        f"d{i % 3}/f{i}.txt": f"Angela Merkel {i} visited Acme Corp in Berlin.\n" * (i % 3 + 1)
        for i in range(9)
    }
    source = folder(tmp_path / "in", texts)
    for fmt in ("jsonl", "conll"):
        assert predict("--input", str(source), "--output", str(tmp_path / f"one_{fmt}"), "--format", fmt) == 0
        assert main(
            ["predict", "--input", str(source), "--output", str(tmp_path / f"two_{fmt}"), "--format", fmt,
             "--workers", "2"]
        ) == 0  # fmt: skip
        assert files_under(tmp_path / f"two_{fmt}") == files_under(tmp_path / f"one_{fmt}")
    assert (
        main(["predict", "--input", str(source), "--workers", "2", "--output", str(tmp_path / "w.jsonl")])
        == 0
    )
    assert predict("--input", str(source), "--output", str(tmp_path / "p.jsonl")) == 0
    assert (tmp_path / "w.jsonl").read_bytes() == (tmp_path / "p.jsonl").read_bytes()


@pytest.mark.slow  # three processes, one killed: 20 s
def test_a_run_killed_midway_resumes_to_what_one_clean_run_writes(tmp_path: Path) -> None:
    texts = {f"d{i % 10}/f{i:03d}.txt": f"Bob Jones {i} met Alice Smith in Paris.\n" * 10 for i in range(200)}
    source = folder(tmp_path / "in", texts)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ner_app", "predict", "--threads", "1", "--input", str(source)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([*command, "--output", str(out)], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(out.rglob("*.jsonl"))) < 20 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # no handler runs: what is on disk is what a crash leaves
    process.wait()
    written = len(list(out.rglob("*.jsonl")))
    assert 20 <= written < 200, written  # killed in the middle
    # A temporary file the kill left (when it landed inside a write) is swept once its writer has been gone
    # STALE_AFTER_S (a live writer keeps its file fresh): age any such file past that, as a later resume finds it
    for left in out.rglob(".*.tmp"):
        os.utime(left, (time.time() - STALE_AFTER_S - 1,) * 2)
    resumed = subprocess.run([*command, "--output", str(out)], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{written} already done" in resumed.stderr
    clean = subprocess.run([*command, "--output", str(tmp_path / "clean")], env=env, capture_output=True)
    assert clean.returncode == 0
    assert files_under(out) == files_under(tmp_path / "clean")
    assert len(files_under(out)) == 200
    assert not [p for p in out.rglob(".*.tmp")]  # swept, never renamed into an output
