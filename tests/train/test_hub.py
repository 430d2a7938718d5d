"""Datasets in the hub's layout (tokens + ClassLabel ner_tags, train/validation/test): local parquet files and
save_to_disk folders read like CoNLL files, the scheme detected the same way, and a run on a parquet copy
identical to the run on the files it was made from."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import torch
from safetensors.torch import load_file

import train
from ner_app.text.conll import DOCSTART, read_conll
from ner_app.text.tags import convert, entities
from ner_app.train.corpus import data_files, load_corpus
from tests.helpers import REPO, TINY, train_args

# The label names of the hub's CoNLL-2003 (lhoestq/conll2003): IOB2, ClassLabel ids in this order.
HUB_NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
HUB_SPLITS = {"train": "train", "validation": "valid", "test": "test"}


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`datasets` converts parquet into its cache: keep that cache inside the test's folder."""
    import datasets.config

    cache = tmp_path / "hf_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    return cache


def hub_dataset(scheme: str = "IOB2", docstart: bool = False, class_labels: bool = True):  # noqa: ANN201
    """tests/data/tiny_conll (IOB1) as a DatasetDict in the hub's schema, its tags converted to ``scheme``;
    with ``docstart`` a ``-DOCSTART-`` row before each document, as some hub copies keep them."""
    import datasets

    sentences = {split: read_conll(TINY / f"{file}.txt") for split, file in HUB_SPLITS.items()}
    tags = {split: [convert(s.tags, "IOB1", scheme) for s in sents] for split, sents in sentences.items()}
    used = {t for rows in tags.values() for row in rows for t in row}
    names = HUB_NAMES if scheme == "IOB2" else ["O", *sorted(used - {"O"})]
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(
                datasets.ClassLabel(names=names) if class_labels else datasets.Value("string")
            ),
        }
    )
    out = {}
    for split, sents in sentences.items():
        rows: dict[str, list] = {"tokens": [], "ner_tags": []}
        doc = -1
        for sentence, row_tags in zip(sents, tags[split], strict=True):
            if docstart and sentence.doc != doc:
                rows["tokens"].append([DOCSTART])
                rows["ner_tags"].append(["O"])
                doc = sentence.doc
            rows["tokens"].append(sentence.tokens)
            rows["ner_tags"].append(row_tags)
        if class_labels:
            rows["ner_tags"] = [[names.index(t) for t in row] for row in rows["ner_tags"]]
        rows["id"] = [str(i) for i in range(len(rows["tokens"]))]
        out[split] = datasets.Dataset.from_dict(rows, features=features)
    return datasets.DatasetDict(out)


def write_parquet(dataset, folder: Path) -> Path:  # noqa: ANN001
    """The hub's file layout: data/<split>-00000-of-00001.parquet."""
    (folder / "data").mkdir(parents=True)
    for split, ds in dataset.items():
        ds.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    return folder


def test_a_parquet_copy_reads_as_the_conll_files(tmp_path: Path) -> None:
    folder = write_parquet(hub_dataset(), tmp_path / "conll_parquet")
    files, copy = load_corpus(str(TINY), None, "BIOES"), load_corpus(str(folder), None, "BIOES")
    assert (files.source_scheme, copy.source_scheme) == ("IOB1", "IOB2")  # detected, as for files
    for name, split in files.splits.items():
        assert copy.splits[name].tokens == split.tokens
        assert copy.splits[name].tags == split.tags  # the same BIOES training tags from either scheme
        assert [entities(t, "IOB2") for t in copy.splits[name].source_tags] == [
            entities(t, "IOB1") for t in split.source_tags
        ]
        assert copy.splits[name].docs == [0] * len(split)  # the hub's copy has no -DOCSTART- rows
    assert [p.name for p in data_files(str(folder))] == [
        "test-00000-of-00001.parquet",
        "train-00000-of-00001.parquet",
        "validation-00000-of-00001.parquet",
    ]
    assert [p.name for p in data_files(str(TINY))] == ["train.txt", "valid.txt", "test.txt"]


@pytest.mark.parametrize("class_labels", [True, False], ids=["classlabel", "strings"])
@pytest.mark.parametrize("scheme", ["IOB1", "IOB2", "BIOES"])
def test_the_scheme_of_a_dataset_is_detected(tmp_path: Path, scheme: str, class_labels: bool) -> None:
    folder = write_parquet(hub_dataset(scheme, class_labels=class_labels), tmp_path / "d")
    corpus = load_corpus(str(folder), None, "BIOES")
    assert corpus.source_scheme == scheme
    assert corpus.splits["train"].tags == load_corpus(str(TINY), None, "BIOES").splits["train"].tags


def test_a_save_to_disk_folder_with_docstart_rows_has_the_files_documents(tmp_path: Path) -> None:
    hub_dataset(docstart=True).save_to_disk(str(tmp_path / "saved"))
    corpus, files = load_corpus(str(tmp_path / "saved"), None, "BIO"), load_corpus(str(TINY), None, "BIO")
    for name, split in files.splits.items():
        assert corpus.splits[name].tokens == split.tokens  # the -DOCSTART- rows are not sentences
        assert corpus.splits[name].docs == split.docs and len(set(split.docs)) > 1
        assert corpus.splits[name].tags == split.tags
    assert {p.suffix for p in data_files(str(tmp_path / "saved"))} == {".arrow"}


def test_conll_files_win_over_parquet_in_one_folder(tmp_path: Path) -> None:
    folder = write_parquet(hub_dataset(), tmp_path / "both")
    for name in ("train", "valid", "test"):
        (folder / f"{name}.txt").write_bytes((TINY / f"{name}.txt").read_bytes())
    assert load_corpus(str(folder), None, "BIOES").source_scheme == "IOB1"  # the files, not the parquet


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(run / "export" / "model.safetensors")


@pytest.mark.system
def test_training_on_a_parquet_copy_gives_the_same_weights_and_f1(tmp_path: Path) -> None:
    folder = write_parquet(hub_dataset(), tmp_path / "conll_parquet")
    common = ("trainer.max_epochs=8", "trainer.patience=100", "trainer.enable_progress_bar=false")
    assert train.main(train_args(tmp_path / "files", *common)) == 0
    assert train.main(train_args(tmp_path / "parquet", *common, f"data.dir={folder}")) == 0
    files, parquet = weights(tmp_path / "files"), weights(tmp_path / "parquet")
    assert files.keys() == parquet.keys() and len(files) > 5
    for key, tensor in files.items():
        assert torch.equal(tensor, parquet[key]), key  # bit for bit
    scores = [json.loads((tmp_path / run / "metrics.json").read_text()) for run in ("files", "parquet")]
    f1 = [(s["dev"]["f1"], s["test"]["f1"]) for s in scores]
    assert f1[0] == f1[1] and f1[0][0] > 0.5, f1  # trained far enough that F1 says something


class LoopbackHub(http.server.BaseHTTPRequestHandler):
    """The part of the Hugging Face hub's HTTP API that ``datasets`` uses to download one dataset repository:
    its info, its file tree and its files (``folder`` of the server holds the repository's files)."""

    protocol_version = "HTTP/1.1"
    server: LoopbackServer

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        url = urlparse(self.path)
        path, repo, sha = unquote(url.path), self.server.repo, self.server.sha
        files = sorted(
            p.relative_to(self.server.folder).as_posix() for p in self.server.folder.rglob("*") if p.is_file()
        )
        if path in (
            f"/api/datasets/{repo}",
            f"/api/datasets/{repo}/revision/main",
            f"/api/datasets/{repo}/revision/{sha}",
        ):
            return self.reply(
                json.dumps({"id": repo, "sha": sha, "siblings": [{"rfilename": f} for f in files]})
            )
        tree = f"/api/datasets/{repo}/tree/{sha}"
        if path.startswith(tree):
            return self.reply(
                json.dumps(self.tree(files, path[len(tree) :].strip("/"), "recursive=true" in url.query))
            )
        for prefix in (f"/datasets/{repo}/resolve/main/", f"/datasets/{repo}/resolve/{sha}/"):
            file = self.server.folder / path[len(prefix) :]
            if path.startswith(prefix) and file.is_file():
                data = file.read_bytes()
                return self.reply(data, etag=hashlib.sha1(data).hexdigest())
        self.reply(b"", status=404, error="EntryNotFound" if "/resolve/" in path else None)

    do_HEAD = do_GET

    def tree(self, files: list[str], folder: str, recursive: bool) -> list[dict[str, object]]:
        entries: dict[str, dict[str, object]] = {}
        for name in files:
            if folder and not name.startswith(f"{folder}/"):
                continue
            rest = name[len(folder) + 1 :] if folder else name
            if "/" in rest and not recursive:
                sub = f"{folder}/{rest.split('/')[0]}" if folder else rest.split("/")[0]
                entries[sub] = {"type": "directory", "path": sub, "oid": "0" * 40}
            else:
                data = (self.server.folder / name).read_bytes()
                entries[name] = {
                    "type": "file",
                    "path": name,
                    "size": len(data),
                    "oid": hashlib.sha1(data).hexdigest(),
                }
        return list(entries.values())

    def reply(
        self, body: str | bytes, status: int = 200, etag: str | None = None, error: str | None = None
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("X-Repo-Commit", self.server.sha)
        if etag:
            self.send_header("ETag", f'"{etag}"')
        if error:
            self.send_header("X-Error-Code", error)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # quiet
        pass


class LoopbackServer(http.server.ThreadingHTTPServer):
    def __init__(self, folder: Path, repo: str) -> None:
        super().__init__(("127.0.0.1", 0), LoopbackHub)
        self.folder, self.repo, self.sha = folder, repo, "1" * 40


READ_CORPUS = """
import json, sys
from ner_app.train.corpus import load_corpus
corpus = load_corpus(None, sys.argv[1], "BIOES")
print(json.dumps([corpus.source_scheme, {n: [s.tokens, s.tags] for n, s in corpus.splits.items()}]))
"""


# The environment of the fresh processes, without an offline switch the caller may have set.
OUTSIDE_ENV = {
    k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT")
}


def read_in_a_fresh_process(name: str, **env: str) -> list:
    """load_corpus in a new interpreter: HF_ENDPOINT and HF_HOME are read when `datasets` is imported."""
    done = subprocess.run(
        [sys.executable, "-c", READ_CORPUS, name],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**OUTSIDE_ENV, "PYTHONPATH": str(REPO), **env},
    )
    assert done.returncode == 0, done.stderr
    assert "Retrying" not in done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow  # three fresh interpreters
def test_a_hub_download_reads_as_the_files_and_is_cached_for_offline_use(tmp_path: Path) -> None:
    repo = write_parquet(hub_dataset(), tmp_path / "repo")  # the layout of lhoestq/conll2003
    files = load_corpus(str(TINY), None, "BIOES")
    expected = ["IOB2", {n: [s.tokens, s.tags] for n, s in files.splits.items()}]
    server = LoopbackServer(repo, "lhoestq/conll2003")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    home = str(tmp_path / "hf_home")
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        assert read_in_a_fresh_process("lhoestq/conll2003", HF_ENDPOINT=endpoint, HF_HOME=home) == expected
    finally:
        server.shutdown()
        server.server_close()
    assert read_in_a_fresh_process("lhoestq/conll2003", HF_HUB_OFFLINE="1", HF_HOME=home) == expected
    with socket.socket() as closed:  # the hub gone (a port that refuses): the cached copy, without retries
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
        assert read_in_a_fresh_process("lhoestq/conll2003", HF_ENDPOINT=endpoint, HF_HOME=home) == expected
