"""Label Studio labeling configs read for NER: its own template, variants it accepts, and the ones that cannot
be a named-entity project, each refused in one line."""

from __future__ import annotations

import pytest

from ner_app.server.labeling_config import (
    LabelingConfig,
    LabelingConfigError,
    map_labels,
    parse_labeling_config,
)
from tests.serve.label_studio.tasks import NER_TEMPLATE


def test_the_named_entity_template() -> None:
    assert parse_labeling_config(NER_TEMPLATE) == LabelingConfig(
        "label", "text", "text", ("PER", "ORG", "LOC", "MISC")
    )


def test_other_names_and_tags_around() -> None:
    config = """<View>
      <Header value="Read and label"/>
      <Text name="body" value="$article" granularity="word"/>
      <Choices name="topic" toName="body"><Choice value="sport"/></Choices>
      <labels name="ents" toName="body"><label value="Person"/><Label value="Place" hotkey="p"/></labels>
    </View>"""
    assert parse_labeling_config(config) == LabelingConfig("ents", "body", "article", ("Person", "Place"))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("<View>", "labeling config is not XML (no element found: line 1, column 6)"),
        ("<View><Text name='t' value='$text'/></View>", 'expected a <Labels name="..." toName="T">'),
        (
            "<View><Labels name='l' toName='x'><Label value='A'/></Labels><Text name='t' value='$text'/></View>",
            "(toName 'x' names no <Text> tag)",
        ),
        (
            "<View><Labels name='l' toName='t'><Label value='A'/></Labels><Text name='t' value='text'/></View>",
            '<Text name="t"> has value \'text\'; expected "$key"',
        ),
        (
            "<View><Labels name='l' toName='t'></Labels><Text name='t' value='$text'/></View>",
            '<Labels name="l"> has no <Label value="..."/>',
        ),
        (
            "<View>" + " " * (1 << 20) + "</View>",
            "labeling config of 1,048,589 characters; at most 1,048,576",
        ),
    ],
)
def test_configs_that_cannot_be_read(config: str, message: str) -> None:
    with pytest.raises(LabelingConfigError) as caught:
        parse_labeling_config(config)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_labels_mapped_onto_types() -> None:
    config = LabelingConfig("label", "text", "text", ("Person", "LOC", "Product"))
    mapped = map_labels(config, {"Person": "PER"}, ["LOC", "MISC", "ORG", "PER"])
    assert mapped.type_of == {"Person": "PER", "LOC": "LOC", "Product": "Product"}
    assert mapped.label_of == {"PER": "Person", "LOC": "LOC", "Product": "Product"}
    assert mapped.new_types == ("Product",) and mapped.unshown == ("MISC", "ORG")
    with pytest.raises(LabelingConfigError, match="--labels: 'Persn' not a label of the project"):
        map_labels(config, {"Persn": "PER"}, ["PER"])
    with pytest.raises(LabelingConfigError, match="the labels 'Person' and 'Product' are both the type PER"):
        map_labels(config, {"Person": "PER", "Product": "PER"}, ["PER"])
