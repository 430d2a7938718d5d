"""A Label Studio project's labeling config, read for NER, and its labels mapped onto a tagger's entity types.

Label Studio sends the project's config (XML) in ``/setup`` (``schema``) and in every ``/predict``
(``label_config``). Named entities are a ``<Labels>`` tag whose ``toName`` names a ``<Text>`` tag; the text's
``value`` (``$text``) is the task data key holding the text; each ``<Label value="...">`` is a label
(labelstud.io/tags/labels, labelstud.io/tags/text). A region of a prediction names both tags
(``from_name``: the Labels, ``to_name``: the Text).

A label is an entity type of the tagger under its own name unless ``--labels`` renames it (``Person=PER``, as
``convert --labels`` and ``data.labels`` rename a tool's labels). A label whose type the tagger does not know
yet is learned by the next training; a type with no label in the project is not predicted.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ner_app.errors import NerAppError

MAX_CONFIG_CHARS = 1 << 20  # a labeling config is a few KB; Label Studio's own templates are under 4 KB


class LabelingConfigError(NerAppError):
    """A labeling config without a usable ``<Labels>`` on a ``<Text>``: one line saying what was expected."""


@dataclass(frozen=True)
class LabelingConfig:
    """The NER part of a labeling config: the two tag names a region names, the task data key of the text
    and the labels in the config's order."""

    from_name: str
    to_name: str
    text_key: str
    labels: tuple[str, ...]


def _local(tag: str) -> str:
    """An element's tag without a namespace, lower-cased (Label Studio's tag names are case-insensitive)."""
    return tag.rsplit("}", 1)[-1].lower()


def parse_labeling_config(xml: str) -> LabelingConfig:
    """The first ``<Labels>`` tag on a ``<Text>`` tag of ``xml``; ``LabelingConfigError`` otherwise."""
    if len(xml) > MAX_CONFIG_CHARS:
        raise LabelingConfigError(f"labeling config of {len(xml):,} characters; at most {MAX_CONFIG_CHARS:,}")
    try:
        root = ET.fromstring(xml)  # no DTD or entity is resolved: ElementTree has no external entities
    except ET.ParseError as err:
        raise LabelingConfigError(f"labeling config is not XML ({err})") from None
    texts = {
        element.get("name", ""): element.get("value", "")
        for element in root.iter()
        if _local(element.tag) == "text"
    }
    found = []
    for element in root.iter():
        if _local(element.tag) != "labels":
            continue
        target = element.get("toName", "")
        if target not in texts:
            found.append(target)
            continue
        value = texts[target]
        if not value.startswith("$") or len(value) < 2:
            raise LabelingConfigError(
                f'labeling config: <Text name="{target}"> has value {value!r}; expected "$key", the task '
                "data key of the text"
            )
        labels = tuple(
            label.get("value", "") for label in element if _local(label.tag) == "label" and label.get("value")
        )
        if not labels:
            raise LabelingConfigError(
                f'labeling config: <Labels name="{element.get("name", "")}"> has no <Label value="..."/>'
            )
        return LabelingConfig(element.get("name", ""), target, value[1:], labels)
    also = f" (toName {', '.join(map(repr, found))} names no <Text> tag)" if found else ""
    raise LabelingConfigError(
        f'labeling config: expected a <Labels name="..." toName="T"> with <Label value="..."/> tags and a '
        f'<Text name="T" value="$text"/>, as Label Studio\'s named entity recognition template has{also}'
    )


@dataclass(frozen=True)
class LabelMap:
    """A project's labels against a tagger's entity types: ``type_of`` each label, ``label_of`` each type
    that has one."""

    type_of: dict[str, str]
    label_of: dict[str, str]
    new_types: tuple[str, ...]  # types of the project's labels that the tagger does not know yet
    unshown: tuple[str, ...]  # the tagger's types with no label in the project: never predicted here


def map_labels(config: LabelingConfig, renames: dict[str, str], types: list[str]) -> LabelMap:
    """Each label of ``config`` as a type (renamed by ``renames``, label -> type); a rename of a label the
    project does not have is refused in one line, as are two labels of one type."""
    unknown = sorted(set(renames) - set(config.labels))
    if unknown:
        raise LabelingConfigError(
            f"--labels: {', '.join(map(repr, unknown))} not a label of the project (its labels: "
            f"{', '.join(config.labels)})"
        )
    type_of = {label: renames.get(label, label) for label in config.labels}
    label_of: dict[str, str] = {}
    for label, kind in type_of.items():
        if kind in label_of:
            raise LabelingConfigError(
                f"--labels: the labels {label_of[kind]!r} and {label!r} are both the type {kind}; one label a type"
            )
        label_of[kind] = label
    return LabelMap(
        type_of,
        label_of,
        tuple(t for t in label_of if t not in types),
        tuple(t for t in types if t not in label_of),
    )
