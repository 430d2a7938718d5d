"""The backend's answers as Label Studio reads them (label_studio/ml/models.py, 1.23: ``results`` as long as
``tasks``, each with ``result``, ``score`` and ``model_version``), and its training: held-out tasks, the switch,
what a failed or worse training leaves."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ner_app.errors import NerAppError
from ner_app.server.backend_training import held_out
from ner_app.server.label_studio_backend import Backend, BackendSpec
from ner_app.server.request_body import BadRequest
from tests.helpers import TINY
from tests.serve.label_studio.tasks import NER_TEMPLATE, SETUP, conll_tasks

pytestmark = pytest.mark.system


def backend(
    model: Path, workdir: Path, config: Path, lines: list[str] | None = None, **keys: object
) -> Backend:
    spec = BackendSpec(model=model, workdir=workdir, config=config, **keys)  # type: ignore[arg-type]
    return Backend(spec, (lines if lines is not None else []).append)


def wait_training(b: Backend) -> None:
    deadline = time.monotonic() + 300
    while b._thread is not None and b._thread.is_alive():
        assert time.monotonic() < deadline, "training did not end"
        time.sleep(0.2)


def test_predict_answers_what_label_studio_reads(model: Path, continue_config: Path, tmp_path: Path) -> None:
    b = backend(model, tmp_path / "w", continue_config)
    assert b.setup(SETUP) == {"model_version": b.current.model_version}
    tasks = [{"id": 7, "data": {"text": "Alice Smith flew to Paris ."}}, {"id": 8, "data": {"text": ""}}]
    answer = b.predict({"tasks": tasks, "project": SETUP["project"], "label_config": NER_TEMPLATE})
    assert len(answer["results"]) == len(tasks)
    version = answer["model_version"]
    assert version.startswith("run-") and len(version) == len("run-") + 8
    first = answer["results"][0]
    assert first["model_version"] == version and 0 < first["score"] <= 1
    spans = {(r["value"]["text"], r["value"]["labels"][0]) for r in first["result"]}
    assert spans == {("Alice Smith", "PER"), ("Paris", "LOC")}
    for region in first["result"]:
        assert region["from_name"] == "label" and region["to_name"] == "text" and region["type"] == "labels"
        assert (
            tasks[0]["data"]["text"][region["value"]["start"] : region["value"]["end"]]
            == region["value"]["text"]
        )
        assert 0 < region["score"] <= 1
    assert len({r["id"] for r in first["result"]}) == len(first["result"])
    assert answer["results"][1]["result"] == []


def test_offsets_count_utf16_units_as_label_studio_does(
    model: Path, continue_config: Path, tmp_path: Path
) -> None:
    text = "\U0001f642 Alice Smith flew to Paris ."
    b = backend(model, tmp_path / "w", continue_config)
    (answer,) = b.predict({"tasks": [{"data": {"text": text}}], "label_config": NER_TEMPLATE})["results"]
    wide = text.encode("utf-16-le")
    assert {"Alice Smith", "Paris"} <= {r["value"]["text"] for r in answer["result"]}
    for region in answer["result"]:
        start, end = region["value"]["start"], region["value"]["end"]
        assert wide[2 * start : 2 * end].decode("utf-16-le") == region["value"]["text"]


def test_task_scores_are_confidences_that_agree_with_select(
    model: Path, continue_config: Path, tmp_path: Path
) -> None:
    """A sentence alone scores as it does in a batch; ``least-confidence`` is 1 - select's number."""
    texts = ["Alice Smith flew to Paris .", "Bob Jones met Acme Corp in Berlin .", "the cat sat"]
    tasks = [{"id": i, "data": {"text": t}} for i, t in enumerate(texts)]
    for kind in ("mnlp", "least-confidence", "margin", "min-entity"):
        b = backend(model, tmp_path / kind, continue_config, task_score=kind)
        together = [r["score"] for r in b.predict({"tasks": tasks, "label_config": NER_TEMPLATE})["results"]]
        alone = [
            b.predict({"tasks": [t], "label_config": NER_TEMPLATE})["results"][0]["score"] for t in tasks
        ]
        assert together == pytest.approx(alone, abs=1e-5), kind
        assert all(0 <= s <= 1 for s in together), kind


def test_labels_renamed_and_unknown_named(model: Path, continue_config: Path, tmp_path: Path) -> None:
    config = NER_TEMPLATE.replace('"PER"', '"Person"').replace('"MISC"', '"Product"')
    lines: list[str] = []
    b = backend(model, tmp_path / "w", continue_config, lines, labels={"Person": "PER"})
    b.setup({**SETUP, "schema": config})
    assert lines == [
        "labels: Product not known to the model yet (learned from the annotations); model types with no label "
        "in the project (not predicted): MISC"
    ]
    tasks = [{"id": 1, "data": {"text": "Alice Smith flew to Paris ."}}]
    result = b.predict({"tasks": tasks, "label_config": config})["results"][0]["result"]
    assert {r["value"]["labels"][0] for r in result} == {"Person", "LOC"}
    with pytest.raises(BadRequest, match="--labels: 'Persn' not a label of the project"):
        backend(model, tmp_path / "w2", continue_config, labels={"Persn": "PER"}).setup(
            {**SETUP, "schema": config}
        )


def test_bad_requests_are_one_line(model: Path, continue_config: Path, tmp_path: Path) -> None:
    b = backend(model, tmp_path / "w", continue_config)
    b.setup(SETUP)
    cases = [
        ({"tasks": [], "label_config": NER_TEMPLATE}, 'expected "tasks": a non-empty list of tasks'),
        (
            {"tasks": [{"id": 4, "data": {"body": "x"}}], "label_config": NER_TEMPLATE},
            'task 4: expected its text in data["text"]',
        ),
        (
            {"tasks": [{"data": {"text": 5}}], "label_config": NER_TEMPLATE},
            'tasks[0]: expected its text in data["text"]',
        ),
        (
            {"tasks": [{"data": {"text": "a\ud800"}}], "label_config": NER_TEMPLATE},
            "tasks[0]: character 2 is a lone surrogate",
        ),
        ({"tasks": [{"data": {"text": "a"}}], "label_config": "<View>"}, "labeling config is not XML"),
        (
            {
                "tasks": [{"data": {"text": "a"}}],
                "label_config": "<View><Text name='t' value='$text'/></View>",
            },
            "expected a <Labels",
        ),
    ]
    for body, message in cases:
        with pytest.raises(BadRequest) as caught:
            b.predict(body)
        assert message in caught.value.message and "\n" not in caught.value.message
    with pytest.raises(BadRequest, match="this backend serves project 3; start another"):
        b.setup({**SETUP, "project": "4.1764662400"})
    assert b.webhook({"action": "PROJECT_UPDATED", "project": {"id": 3}})["status"] == "ignored"
    assert b.webhook({"action": "ANNOTATION_CREATED", "project": {"id": 9}})["status"] == "ignored"


def test_held_out_by_task_id_for_ever() -> None:
    chosen = [i for i in range(10_000) if held_out(i, 0.2)]
    assert 1800 < len(chosen) < 2200
    assert chosen == [i for i in range(10_000) if held_out(i, 0.2)]
    assert set(chosen) <= {i for i in range(10_000) if held_out(i, 0.5)}  # more held out: a superset


@pytest.mark.slow  # seconds of training: the slow lane
def test_training_switches_and_a_restart_serves_the_new_version(
    weak_model: Path, continue_config: Path, tmp_path: Path
) -> None:
    model = weak_model
    tasks = [
        *conll_tasks(TINY / "train.txt"),
        *conll_tasks(TINY / "valid.txt", 100),
        *conll_tasks(TINY / "test.txt", 200),
    ]
    lines: list[str] = []
    workdir = tmp_path / "w"
    b = backend(model, workdir, continue_config, lines, heldout=0.3, min_heldout=1, max_epochs=20)
    b.setup(SETUP)
    first = b.current.model_version
    assert b.train({"annotations": tasks, "project": SETUP["project"], "label_config": NER_TEMPLATE}) == {
        "status": "training started"
    }
    wait_training(b)
    assert b.current.number == 1, lines
    assert b.current.model_version.startswith("run-v1-") and b.current.model_version != first
    heldout = [t for t in tasks if held_out(t["id"], 0.3)]
    assert lines[-1].startswith(f"serving {b.current.model_version} (was {first}): held-out F1 ")
    assert f"on {len(heldout)} tasks, trained on {len(tasks) - len(heldout)}" in lines[-1]
    data = workdir / "versions" / "v1" / "data"
    assert [t["id"] for t in json.loads((data / "valid.json").read_text())] == [t["id"] for t in heldout]
    answer = b.predict({"tasks": tasks[:1], "label_config": NER_TEMPLATE})
    assert answer["model_version"] == b.current.model_version
    state = json.loads((workdir / "state.json").read_text())
    assert state["serving"] == 1 and state["project"] == 3 and len(state["versions"]) == 2
    again = backend(model, workdir, continue_config)
    assert again.current == b.current and again.project == 3


@pytest.mark.slow
def test_a_worse_model_is_not_served(model: Path, continue_config: Path, tmp_path: Path) -> None:
    """Annotations that call every entity MISC, learnt at a large learning rate, train a model that loses on
    the held-out tasks (which keep the true types): the serving model stays, and the log says why."""
    every = {"PER": "MISC", "ORG": "MISC", "LOC": "MISC"}
    tasks = [*conll_tasks(TINY / "train.txt", rename=every), *conll_tasks(TINY / "valid.txt", 100, every)]
    wrong = [t for t in tasks if not held_out(t["id"], 0.3)]
    right = [t for t in conll_tasks(TINY / "test.txt", 200) if held_out(t["id"], 0.3)]
    config = tmp_path / "fast.yaml"
    config.write_text(f"base: {continue_config}\noptim:\n  lr: 0.3\n")
    lines: list[str] = []
    b = backend(model, tmp_path / "w", config, lines, heldout=0.3, min_heldout=1, max_epochs=3)
    b.setup(SETUP)
    first = b.current
    b.train({"annotations": wrong + right})
    wait_training(b)
    assert b.current == first
    assert lines[-1].startswith(f"kept {first.model_version}: v1 has held-out F1 "), lines
    assert len(b.versions.all) == 2  # tried and recorded, never served


@pytest.mark.slow
def test_a_failed_training_leaves_the_serving_model(model: Path, tmp_path: Path) -> None:
    config = tmp_path / "other.yaml"
    config.write_text(
        f"base: {Path(__file__).resolve().parents[3] / 'configs' / 'tiny.yaml'}\nelmo:\n  enabled: false\nmodel:\n  lstm_hidden: 24\n"
    )
    lines: list[str] = []
    b = backend(model, tmp_path / "w", config, lines, heldout=0.5, min_heldout=1)
    b.setup(SETUP)
    first = b.current
    b.train({"annotations": conll_tasks(TINY / "train.txt") + conll_tasks(TINY / "valid.txt", first_id=100)})
    wait_training(b)
    assert b.current == first
    assert len(lines) == 2 and lines[-1].startswith(
        f"training failed; still serving {first.model_version}: train exited with 2: "
    )
    assert "model.lstm_hidden is 24 in this run but 16 in the export" in lines[-1]
    b.train({"annotations": conll_tasks(TINY / "train.txt") + conll_tasks(TINY / "valid.txt", first_id=100)})
    wait_training(b)  # again: a new folder, never the one the failed training left
    assert "model.lstm_hidden is 24" in lines[-1] and "versions/v2/train.log" in lines[-1]
    assert b.current == first


def test_too_few_held_out_tasks_wait(model: Path, continue_config: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    b = backend(model, tmp_path / "w", continue_config, lines, min_heldout=50)
    b.train({"annotations": conll_tasks(TINY / "train.txt")})
    wait_training(b)
    assert b.current.number == 0 and not (tmp_path / "w" / "versions").exists()
    assert lines[-1].startswith("not training yet: 5 annotated tasks,")


def test_a_workdir_it_did_not_make_is_refused(model: Path, continue_config: Path, tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(NerAppError, match="a folder ner-app label-studio did not make"):
        backend(model, tmp_path / "mine", continue_config)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
