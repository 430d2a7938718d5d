"""Label Studio tasks as its JSON export holds them, made from a CoNLL file (the annotators' work, known exactly),
and its named-entity template as Label Studio 1.23 ships it."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from ner_app.text.conll import read_conll
from ner_app.text.tags import convert, detect_scheme, entities

# label_studio/annotation_templates/natural-language-processing/named-entity-recognition/config.yml, Label Studio 1.23
NER_TEMPLATE = """<View>
  <Labels name="label" toName="text">
    <Label value="PER" background="red"/>
    <Label value="ORG" background="darkorange"/>
    <Label value="LOC" background="orange"/>
    <Label value="MISC" background="green"/>
  </Labels>

  <Text name="text" value="$text"/>
</View>
"""

# What Label Studio 1.23 sends to /setup (ml/api_connector.py): the project as "ID.CREATED_TIMESTAMP", its config
SETUP = {
    "project": "3.1764662400",
    "schema": NER_TEMPLATE,
    "hostname": "http://127.0.0.1:1",
    "access_token": "k",
}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def regions(
    tokens: list[str], tags: list[str], scheme: str, rename: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The spans of one sentence as Label Studio result regions over its tokens joined by spaces."""
    starts, at = [], 0
    for token in tokens:
        starts.append(at)
        at += len(token) + 1
    found = []
    for n, (kind, first, last) in enumerate(entities(convert(tags, scheme, "IOB2"), "IOB2")):
        start, end = starts[first], starts[last - 1] + len(tokens[last - 1])
        label = (rename or {}).get(kind, kind)
        found.append(
            {
                "id": f"r{n}",
                "from_name": "label",
                "to_name": "text",
                "type": "labels",
                "origin": "manual",
                "value": {"start": start, "end": end, "text": " ".join(tokens)[start:end], "labels": [label]},
            }
        )
    return found


def conll_tasks(path: Path, first_id: int = 1, rename: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Each sentence of ``path`` a task with one submitted annotation of its gold entities."""
    sentences = read_conll(path)
    scheme = detect_scheme(s.tags for s in sentences)
    tasks = []
    for i, sentence in enumerate(sentences):
        tokens = list(sentence.tokens)
        annotation = {
            "id": 1000 + i,
            "completed_by": 1,
            "result": regions(tokens, list(sentence.tags), scheme, rename),
            "was_cancelled": False,
            "ground_truth": False,
            "created_at": "2026-12-02T08:00:00.000000Z",
            "updated_at": "2026-12-02T08:00:00.000000Z",
            "lead_time": 3.5,
            "task": first_id + i,
        }
        tasks.append(
            {
                "id": first_id + i,
                "data": {"text": " ".join(tokens)},
                "annotations": [annotation],
                "predictions": [],
                "project": 3,
            }
        )
    return tasks
