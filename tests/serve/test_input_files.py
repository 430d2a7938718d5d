"""The files of a folder or pattern input, their shards, and the output folder's manifest: no model needed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ner_app.errors import NerAppError
from ner_app.jobs.folder_outputs import (
    EXTENSIONS,
    MANIFEST,
    Identity,
    Writer,
    claim_outputs,
    done,
    output_name,
    write_manifest,
    write_one,
)
from ner_app.jobs.input_files import Shard, is_many, list_inputs, parse_shard
from ner_app.report.formats import FORMATS

IDENTITY = Identity("tiny-0123abcd", "0123abcd" + "0" * 56, "jsonl", 0.0, 0, None)


def tree(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"{name}\n", encoding="utf-8")
    return root


def relatives(source: str | Path, leave_out: Path | None = None) -> list[str]:
    return [f.relative for f in list_inputs(str(source), leave_out)]


def test_a_folder_is_walked_sorted_skipping_hidden_links_to_folders_and_special_files(tmp_path: Path) -> None:
    root = tree(
        tmp_path / "in", ["b.txt", "a/z.md", "a/b/c.txt", ".hidden.txt", ".git/x.txt", "a/.cache/y.txt"]
    )
    os.symlink(root / "a", root / "loop")  # a symlinked folder: never followed
    os.symlink(root / "b.txt", root / "link.txt")  # a symlinked file: read where it points
    os.mkfifo(root / "fifo")  # would block a read
    os.symlink(root / "missing", root / "dangling.txt")
    assert relatives(root) == ["a/b/c.txt", "a/z.md", "b.txt", "link.txt"]
    assert is_many(str(root)) and not is_many(str(root / "b.txt")) and not is_many("-")


def test_a_pattern_is_expanded_sorted_relative_to_its_fixed_folders(tmp_path: Path, monkeypatch) -> None:
    root = tree(tmp_path / "in", ["b.txt", "a/z.txt", "a/b/c.txt", "a/b/d.md", "a/.h/e.txt", ".f.txt"])
    assert relatives(root / "**" / "*.txt") == ["a/b/c.txt", "a/z.txt", "b.txt"]
    assert relatives(root / "a" / "*" / "*.md") == ["b/d.md"]
    monkeypatch.chdir(root)
    assert relatives("*.txt") == ["b.txt"] and is_many("*.txt") and not is_many("nothing.txt")
    out = root / "out"
    tree(out, ["b.txt.jsonl", "x.txt"])  # a pattern never picks up what predict wrote under --output
    assert relatives("**/*", out.resolve()) == ["a/b/c.txt", "a/b/d.md", "a/z.txt", "b.txt"]


def test_nothing_to_tag_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    tree(tmp_path / "empty", [".only_hidden"])
    with pytest.raises(NerAppError) as err:
        list_inputs(str(tmp_path / "empty"))
    assert str(err.value) == f"--input {tmp_path / 'empty'}: holds no files to tag (hidden ones are skipped)"
    with pytest.raises(NerAppError) as err:
        list_inputs(str(tmp_path / "*.txt"))
    assert (
        str(err.value)
        == f"--input {tmp_path / '*.txt'}: no file matches this pattern (hidden files are skipped)"
    )


def test_a_file_name_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("x\n")
    with pytest.raises(NerAppError, match=r"the file name is not UTF-8; rename it"):
        list_inputs(str(root))


@pytest.mark.parametrize(
    ("text", "shard"), [("1/1", Shard(1, 1)), ("2/3", Shard(2, 3)), (" 3 / 3 ", Shard(3, 3))]
)
def test_shard_values(text: str, shard: Shard) -> None:
    assert parse_shard(text) == shard and str(shard) == f"{shard.index}/{shard.count}"


@pytest.mark.parametrize("text", ["0/2", "3/2", "a/b", "1", "1/0", "-1/2", "1/2/3", ""])
def test_bad_shard_values_are_refused(text: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_shard(text)
    assert (
        str(err.value) == f"expected I/N with 1 <= I <= N (the I-th of N shares of the files), found {text!r}"
    )


def test_shards_partition_the_files_stably() -> None:
    names = [f"doc{i}/part{j}.txt" for i in range(40) for j in range(5)]
    for count in (1, 2, 3, 7):
        shards = [Shard(i, count) for i in range(1, count + 1)]
        owners = [[s for s in shards if s.holds(n)] for n in names]
        assert all(len(o) == 1 for o in owners)  # every file in exactly one shard
        sizes = [sum(o[0] == s for o in owners) for s in shards]
        assert min(sizes) > len(names) / count / 2  # and the shares about even
    # the first 8 bytes of the relative path's sha256, big-endian, modulo N, plus 1 (as docs/deploying.md
    # says, so a script can compute it): pinned, so every machine and Python version agrees
    assert [Shard(i, 4).holds("a/b.txt") for i in range(1, 5)] == [False, False, False, True]
    assert [Shard(i, 4).holds("b.txt") for i in range(1, 5)] == [False, True, False, False]


def test_every_format_has_an_output_name() -> None:
    assert set(EXTENSIONS) == set(FORMATS)
    assert output_name("a/b.txt", "jsonl") == "a/b.txt.jsonl" and output_name("x", "brat") == "x.brat"


def test_the_output_folder_is_claimed_by_its_manifest(tmp_path: Path) -> None:
    out, option = tmp_path / "out", "--output out"
    assert claim_outputs(out, IDENTITY, False, option) is False  # new: nothing done
    out.mkdir()
    assert claim_outputs(out, IDENTITY, False, option) is False  # empty
    write_manifest(out, IDENTITY)
    assert json.loads((out / MANIFEST).read_text())["model"] == "tiny-0123abcd"
    assert claim_outputs(out, IDENTITY, False, option) is True  # a re-run: outputs there are done
    renamed = Identity("elsewhere-0123abcd", IDENTITY.weights_sha256, "jsonl", 0.0, 0, None)
    assert claim_outputs(out, renamed, False, option) is True  # the same weights in another folder
    other = Identity("tiny-0123abcd", IDENTITY.weights_sha256, "jsonl", 0.5, 0, 0.2)
    with pytest.raises(NerAppError) as err:
        claim_outputs(out, other, False, option)
    assert str(err.value) == (
        "--output out: holds outputs of another model or other options (--min-score 0.0 there, 0.5 now; "
        "--flag-missed none there, 0.2 now); nothing was changed: choose another output folder, or add "
        "--overwrite to tag every file again"
    )
    assert claim_outputs(out, other, True, option) is False  # --overwrite: everything tagged again
    model = Identity("tiny-ffffffff", "f" * 64, "jsonl", 0.0, 0, None)
    with pytest.raises(NerAppError, match=r"\(model weights 0123abcd0000 there, ffffffffffff now\)"):
        claim_outputs(out, model, False, option)


def test_a_folder_predict_did_not_write_is_refused(tmp_path: Path) -> None:
    out = tree(tmp_path / "out", ["notes.txt", "b.txt"])
    with pytest.raises(NerAppError) as err:
        claim_outputs(out, IDENTITY, False, "--output out")
    assert str(err.value) == (
        "--output out: exists and is not an output folder of predict (it holds b.txt, notes.txt); nothing was "
        "changed: choose another output folder, or add --overwrite to write into it"
    )
    assert claim_outputs(out, IDENTITY, True, "--output out") is False
    (out / MANIFEST).write_text('{"written_by": "someone else"}')
    with pytest.raises(NerAppError, match=f"{MANIFEST} is not a manifest predict wrote"):
        claim_outputs(out, IDENTITY, False, "--output out")
    with pytest.raises(NerAppError, match="exists and is not a folder"):
        claim_outputs(out / "b.txt", IDENTITY, False, "--output out/b.txt")


def test_an_output_older_than_the_manifest_is_not_done(tmp_path: Path) -> None:
    out = tmp_path / "out"
    tree(out, ["old.txt.jsonl"])
    past = time.time() - 100
    os.utime(out / "old.txt.jsonl", (past, past))  # written before this manifest: another model's
    write_manifest(out, IDENTITY)
    tree(out, ["new.txt.jsonl"])
    assert not done(out, "old.txt.jsonl") and done(out, "new.txt.jsonl") and not done(out, "absent.jsonl")
    mtime = (out / MANIFEST).stat().st_mtime_ns
    write_manifest(out, IDENTITY)  # the same manifest is not rewritten: what was done stays done
    assert (out / MANIFEST).stat().st_mtime_ns == mtime and done(out, "new.txt.jsonl")


def test_the_writer_keeps_the_order_and_raises_a_failed_write(tmp_path: Path) -> None:
    written: list[int] = []
    with Writer() as writer:
        for i in range(30):
            writer.submit(written.append, i)
    assert written == list(range(30))

    def fail(i: int) -> None:
        if i == 3:
            raise OSError(28, "No space left on device", "out/x.jsonl")
        written.append(i)

    written.clear()
    with pytest.raises(OSError, match="No space left"), Writer() as writer:
        for i in range(5):
            writer.submit(fail, i)
    assert written[:3] == [0, 1, 2] and 3 not in written
    write_one(tmp_path, "a/b.txt.brat", [("doc000001.txt", "x\n"), ("doc000001.ann", "")])
    write_one(tmp_path, "a/b.txt.jsonl", "{}\n")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "a/b.txt.brat/doc000001.ann", "a/b.txt.brat/doc000001.txt", "a/b.txt.jsonl"
    ]  # fmt: skip
