"""ner_app as Label Studio's model backend (``ner-app label-studio``, docs/label_studio.md): what each request of
Label Studio's ML backend protocol does, apart from HTTP (``label_studio_http.py``).

- ``/setup`` (when a project connects): the project's labeling config read, its labels mapped onto the tagger's
  types; the answer names the model version.
- ``/predict``: each task's text tagged; every entity a region with its probability as ``score``, the task's
  ``score`` its confidence (lowest first is the order to annotate in, as Label Studio sorts), and
  ``model_version`` the model's folder name and the start of its weights' sha256.
- ``/webhook`` (annotation events, and Start Training) and ``/train``: a training in the background, one at a
  time (events during one start one more after it): the project's annotated tasks fetched, a fixed share of
  them held out by task id (a task is held out or not for ever, so no version is judged on tasks it learned
  from), ``train --init-from`` the serving model in a child process, and the new model served only if its F1 on
  the held-out tasks is at least the serving model's. The switch is atomic; a failed or worse training leaves
  the serving model as it was, with one line in the log saying why.

Every version, the state file and the training data live in the work folder; a restarted backend serves the
version it served.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError
from ner_app.server.backend_training import Training, TrainingSpec, annotated, held_out
from ner_app.server.backend_versions import Version, Versions
from ner_app.server.label_studio_client import LabelStudioClient
from ner_app.server.labeling_config import LabelingConfig, LabelMap, map_labels, parse_labeling_config
from ner_app.server.request_body import BAD_REQUEST, TOO_LARGE, BadRequest
from ner_app.tagger.version import model_name, model_version

TASK_SCORES = ("mnlp", "least-confidence", "margin", "min-entity")
TRAINING_ACTIONS = frozenset(
    {
        "ANNOTATION_CREATED",
        "ANNOTATIONS_CREATED",
        "ANNOTATION_UPDATED",
        "ANNOTATIONS_DELETED",
        "START_TRAINING",
    }
)
MAX_TASKS = 10_000  # tasks in one /predict request
MAX_TEXT_CHARS = 1_000_000  # characters of one task's text


@dataclass(frozen=True)
class BackendSpec:
    """What ``ner-app label-studio`` runs: the first model, where versions go, how to reach Label Studio and
    how to train."""

    model: Path
    workdir: Path
    config: Path  # the training config, whose architecture must be the model's (own_data_continue.yaml)
    label_studio_url: str | None = None  # default: the hostname Label Studio sends in /setup
    api_key: str | None = None  # default: the access token Label Studio sends in /setup
    labels: dict[str, str] | None = None  # project label -> entity type, where they differ
    task_score: str = "mnlp"
    heldout: float = 0.2  # share of annotated tasks held out, by task id
    min_heldout: int = 5  # no training until this many tasks are held out
    max_epochs: int = 10
    threads: int = 1  # torch threads of the training process
    partial: bool = False  # text outside the annotated spans is not annotated (data.outside=unknown)
    train: bool = True
    seed: int = 13
    train_timeout: float = 3600.0


def utf16_offsets(text: str) -> Callable[[int], int]:
    """Code-point offsets of ``text`` as Label Studio's editor counts them: in UTF-16 code units (JavaScript
    string indices), two for a character outside the Basic Multilingual Plane (an emoji)."""
    astral = [i for i, c in enumerate(text) if ord(c) > 0xFFFF]
    return lambda offset: offset + bisect.bisect_left(astral, offset)


class Backend:
    """The serving model, its versions and the training in the background; thread-safe."""

    def __init__(self, spec: BackendSpec, log: Callable[[str], None] = print) -> None:
        from ner_app.predict.api import load_tagger

        self.spec, self.log = spec, log
        self._load = load_tagger
        self._lock = threading.Lock()  # the serving model and the versions
        self._training = threading.Lock()  # one training at a time
        self._pending = False
        self._given: list[dict[str, Any]] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.hostname: str | None = None
        self.access_token: str | None = None
        self._configs: dict[str, tuple[LabelingConfig, LabelMap]] = {}
        first = Version(0, str(spec.model.resolve()), model_version(spec.model))
        self.versions = Versions.open(spec.workdir, first)
        self.current = self.versions.served
        self.tagger = self._load(Path(self.current.export))
        self.trainer = Training(
            TrainingSpec(
                spec.config,
                spec.max_epochs,
                spec.threads,
                spec.seed,
                spec.labels,
                spec.partial,
                spec.train_timeout,
            )
        )

    @property
    def project(self) -> int | None:
        return self.versions.project

    # ----- the protocol

    def health(self) -> dict[str, Any]:
        return {"status": "UP", "model_class": "ner_app", "model_version": self.current.model_version}

    def _project(self, value: Any) -> int:
        """Label Studio names a project ``"ID.TIMESTAMP"``; the backend serves one project."""
        head = str(value).split(".", 1)[0]
        if not head.isdigit():
            raise BadRequest(BAD_REQUEST, f'"project" is {str(value)[:40]!r}; expected "ID.TIMESTAMP"')
        project = int(head)
        with self._lock:
            if self.versions.project is None:
                self.versions.project = project
                self.versions.save()
        if project != self.project:
            raise BadRequest(
                BAD_REQUEST,
                f"this backend serves project {self.project}; start another (with its own --workdir) for project "
                f"{project}",
            )
        return project

    def _labeling(self, xml: Any) -> tuple[LabelingConfig, LabelMap]:
        if not isinstance(xml, str):
            raise BadRequest(BAD_REQUEST, "expected the project's labeling config (XML) as a string")
        known = self._configs.get(xml)
        if known is not None:
            return known
        try:
            config = parse_labeling_config(xml)
            mapped = map_labels(config, self.spec.labels or {}, self.tagger.entity_types)
        except NerAppError as err:
            raise BadRequest(BAD_REQUEST, str(err)) from None
        if mapped.new_types or mapped.unshown:
            self.log(
                f"labels: {', '.join(mapped.new_types) or 'none'} not known to the model yet (learned from the "
                f"annotations); model types with no label in the project (not predicted): "
                f"{', '.join(mapped.unshown) or 'none'}"
            )
        self._configs = {xml: (config, mapped)}
        return config, mapped

    def setup(self, body: dict[str, Any]) -> dict[str, Any]:
        self._project(body.get("project"))
        self._labeling(body.get("schema"))
        hostname, token = body.get("hostname"), body.get("access_token")
        self.hostname = hostname if isinstance(hostname, str) and hostname else self.hostname
        self.access_token = token if isinstance(token, str) and token else self.access_token
        return {"model_version": self.current.model_version}

    def predict(self, body: dict[str, Any]) -> dict[str, Any]:
        tasks = body.get("tasks")
        if not isinstance(tasks, list) or not tasks:
            raise BadRequest(BAD_REQUEST, 'expected "tasks": a non-empty list of tasks')
        if len(tasks) > MAX_TASKS:
            raise BadRequest(TOO_LARGE, f"{len(tasks):,} tasks; at most {MAX_TASKS:,} in one request")
        config, mapped = self._labeling(body.get("label_config"))
        texts = [self._text(task, config, i) for i, task in enumerate(tasks)]
        with self._lock:
            tagger, version = self.tagger, self.current.model_version
            lines = tagger.predict_lines(texts)
            scores = self._task_scores(tagger, texts, lines)
        results = []
        for text, line, score in zip(texts, lines, scores, strict=True):
            units = utf16_offsets(text)
            regions = [
                {
                    "id": f"ner{n}",
                    "from_name": config.from_name,
                    "to_name": config.to_name,
                    "type": "labels",
                    "value": {
                        "start": units(e.start),
                        "end": units(e.end),
                        "text": e.text,
                        "labels": [mapped.label_of[e.type]],
                    },
                    "score": e.score,
                }
                for n, e in enumerate(line.entities)
                if e.type in mapped.label_of
            ]
            results.append({"result": regions, "score": score, "model_version": version})
        return {"results": results, "model_version": version}

    @staticmethod
    def _text(task: Any, config: LabelingConfig, i: int) -> str:
        data = task.get("data") if isinstance(task, dict) else None
        text = data.get(config.text_key) if isinstance(data, dict) else None
        if not isinstance(text, str):
            where = f"task {task.get('id')}" if isinstance(task, dict) and "id" in task else f"tasks[{i}]"
            raise BadRequest(BAD_REQUEST, f'{where}: expected its text in data["{config.text_key}"]')
        if len(text) > MAX_TEXT_CHARS:
            raise BadRequest(TOO_LARGE, f"tasks[{i}]: {len(text):,} characters; at most {MAX_TEXT_CHARS:,}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise BadRequest(
                BAD_REQUEST, f"tasks[{i}]: character {err.start + 1} is a lone surrogate"
            ) from None
        return text

    def _task_scores(self, tagger: Any, texts: list[str], lines: list[Any]) -> list[float]:
        """Each task's confidence (lower: annotate sooner): ``mnlp`` exp(log P(best tags) / tokens),
        ``least-confidence`` P(best tags), ``margin`` P(best) - P(second best), ``min-entity`` the least
        probable entity's probability (1 with none)."""
        kind = self.spec.task_score
        if kind == "min-entity":
            return [min((e.score for e in line.entities), default=1.0) for line in lines]
        from ner_app.decisions.selection import Candidate, pool_uncertainty
        from ner_app.text.pieces import MAX_TOKENS
        from ner_app.text.tokenizer import sentences

        candidates = [
            Candidate(
                i,
                1,
                text,
                tuple(tuple(t.text for t in s) for s in sentences(text, max_tokens=MAX_TOKENS)),
                (),
                i,
            )
            for i, text in enumerate(texts)
        ]
        found = pool_uncertainty(tagger.predictor, candidates)
        if kind == "least-confidence":
            return [math.exp(u.log_best) for u in found]
        if kind == "margin":
            return [u.margin for u in found]
        return [math.exp(u.normalized_log_best) for u in found]

    def webhook(self, body: dict[str, Any]) -> dict[str, Any]:
        action = body.get("action")
        if action not in TRAINING_ACTIONS:
            return {"status": "ignored", "action": str(action)[:60]}
        project = body.get("project")
        project_id = project.get("id") if isinstance(project, dict) else None
        if project_id is not None and self.project is not None and project_id != self.project:
            return {"status": "ignored", "reason": f"not project {self.project}"}
        if project_id is not None and self.project is None:
            self._project(project_id)
        return self.request_training(None)

    def train(self, body: dict[str, Any]) -> dict[str, Any]:
        """The older protocol: the annotated tasks come in the request (``annotations``)."""
        tasks = body.get("annotations")
        if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
            raise BadRequest(BAD_REQUEST, 'expected "annotations": the list of annotated tasks')
        if "label_config" in body:
            self._labeling(body["label_config"])
        return self.request_training(tasks)

    # ----- training

    def request_training(self, tasks: list[dict[str, Any]] | None) -> dict[str, Any]:
        """Start a training in the background, or, while one runs, one more after it."""
        if not self.spec.train:
            return {"status": "training is off (--no-train)"}
        with self._lock:
            self._pending = True
            self._given = tasks
            if self._thread is not None and self._thread.is_alive():
                return {"status": "queued after the training that runs"}
            self._thread = threading.Thread(target=self._train_loop, name="training", daemon=True)
            self._thread.start()
        return {"status": "training started"}

    def _train_loop(self) -> None:
        with self._training:
            while not self._stopping:
                with self._lock:
                    if not self._pending:
                        return
                    self._pending, tasks = False, self._given
                try:
                    used = self._train_once(tasks)
                    if used is not None and not self._stopping:
                        self._check_for_more(used)
                except NerAppError as err:
                    self.log(f"training failed; still serving {self.current.model_version}: {err}")
                except Exception as err:  # noqa: BLE001 (the server goes on serving; the log says why)
                    self.log(
                        f"training failed; still serving {self.current.model_version}: {type(err).__name__}: {err}"
                    )

    def _check_for_more(self, used: frozenset[tuple[Any, ...]]) -> None:
        """Label Studio may send an annotation's event before its export holds the annotation: after each
        training from the export, read it again, and train once more if it holds annotations the training did
        not see (the last ones of a burst would otherwise wait for the next event)."""
        now = _annotations_of(self._client().annotated_tasks(int(self.project or 0)))
        if now != used:
            with self._lock:
                self._pending, self._given = True, None

    def _client(self) -> LabelStudioClient:
        url = self.spec.label_studio_url or self.hostname
        if not url:
            raise NerAppError("no Label Studio URL: give --label-studio-url or set LABEL_STUDIO_URL")
        return LabelStudioClient(url, self.spec.api_key or self.access_token or "")

    def _train_once(self, given: list[dict[str, Any]] | None) -> frozenset[tuple[Any, ...]] | None:
        """One training; the annotations it read from Label Studio (None when they came in the request)."""
        if self.project is None and given is None:
            raise NerAppError("no project has connected yet (Label Studio calls /setup when one does)")
        started = time.monotonic()
        tasks = given if given is not None else self._client().annotated_tasks(int(self.project or 0))
        done = [t for t in tasks if annotated(t)]
        heldout = [t for t in done if held_out(t.get("id"), self.spec.heldout)]
        train = [t for t in done if not held_out(t.get("id"), self.spec.heldout)]
        if len(heldout) < self.spec.min_heldout or not train:
            self.log(
                f"not training yet: {len(done)} annotated tasks, {len(heldout)} held out; training starts "
                f"once {self.spec.min_heldout} are held out (--min-heldout) and one is left to train on"
            )
            return None if given is not None else _annotations_of(tasks)
        number, folder = self.versions.next_folder()
        data = self.trainer.write_data(folder, train, heldout)
        self.log(
            f"training v{number} from {self.current.model_version}: {len(train)} tasks, {len(heldout)} held out"
        )
        export = self.trainer.run(folder, data, Path(self.current.export))
        gold = self.trainer.heldout_gold(folder, data / "valid.json")
        from ner_app.predict.evaluate import evaluate_file

        candidate = self._load(export)
        new_f1 = evaluate_file(candidate.predictor, gold)[0]["f1"]
        with self._lock:
            old_f1 = evaluate_file(self.tagger.predictor, gold)[0]["f1"]
        name = f"{model_name(self.spec.model)}-v{number}"
        version = Version(number, str(export), model_version(export, name), new_f1, len(train))
        seconds = time.monotonic() - started
        with self._lock:
            self.versions.all.append(version)
            previous = self.current
            if new_f1 >= old_f1:  # the switch: the next request is answered by the new model
                self.tagger, self.current, self.versions.serving = candidate, version, number
            self.versions.save()
        if new_f1 < old_f1:
            self.log(
                f"kept {previous.model_version}: v{number} has held-out F1 {new_f1:.2f} < {old_f1:.2f} on "
                f"{len(heldout)} tasks ({seconds:.0f} s)"
            )
        else:
            self.log(
                f"serving {version.model_version} (was {previous.model_version}): held-out F1 {old_f1:.2f} -> "
                f"{new_f1:.2f} on {len(heldout)} tasks, trained on {len(train)} ({seconds:.0f} s)"
            )
        return None if given is not None else _annotations_of(tasks)

    def stop(self) -> None:
        """Stop a training that runs (the server is stopping); its version is never served."""
        self._stopping = True
        self.trainer.stop()


def _annotations_of(tasks: list[dict[str, Any]]) -> frozenset[tuple[Any, ...]]:
    """What a training read of an export: each task's id with the ids and update times of its annotations."""
    found = set()
    for task in tasks:
        annotations = task.get("annotations")
        for a in annotations if isinstance(annotations, list) else ():
            if isinstance(a, dict):
                found.add(
                    (
                        str(task.get("id")),
                        str(a.get("id")),
                        str(a.get("updated_at")),
                        bool(a.get("was_cancelled")),
                    )
                )
    return frozenset(found)
