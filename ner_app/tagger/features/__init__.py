"""The tagger's input features (``base.py``: the protocol and the registry); importing the package registers
the built-in ones."""

from ner_app.tagger.features import chars, elmo, transformer, words
from ner_app.tagger.features.base import (
    FEATURES,
    CacheSource,
    FeatureError,
    FeatureInputs,
    FeatureOutput,
    FeatureSpec,
    InputFeature,
    feature_class,
    register_feature,
)

__all__ = [
    "FEATURES",
    "CacheSource",
    "FeatureError",
    "FeatureInputs",
    "FeatureOutput",
    "FeatureSpec",
    "InputFeature",
    "chars",
    "elmo",
    "feature_class",
    "register_feature",
    "transformer",
    "words",
]
