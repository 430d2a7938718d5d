"""The supported version range of a dependency, as pyproject.toml states it, for the tests that pin a compat
module (a private API it reaches) to that range."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def supported_range(distribution: str) -> SpecifierSet:
    """The specifier of ``distribution`` among pyproject's dependencies (its optional ones included)."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    requirements = [
        *project["dependencies"],
        *(r for extra in project.get("optional-dependencies", {}).values() for r in extra),
    ]
    wanted = re.sub(r"[-_.]+", "-", distribution).lower()
    for text in requirements:
        requirement = Requirement(text)
        if re.sub(r"[-_.]+", "-", requirement.name).lower() == wanted:
            return requirement.specifier
    raise AssertionError(f"{distribution} is not a dependency in {PYPROJECT}")


def installed_in_range(distribution: str) -> Version:
    """The installed version of ``distribution``; fails when it lies outside pyproject's range."""
    found = Version(version(distribution))
    allowed = supported_range(distribution)
    assert allowed.contains(found, prereleases=True), (
        f"{distribution} {found} is outside the supported range {allowed} (pyproject.toml): "
        "check its compat module against this version, then widen the range"
    )
    return found
