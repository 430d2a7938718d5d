"""Shared fixtures: the ../shared folder (skipped when missing) and tiny biLMs written to tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ner_app.bilm.weights import save_bilm
from tests.helpers import REPO, random_bilm

# Fixtures that train a tiny run, by the folder whose conftest.py defines them: every test of that folder using
# one is marked ``system``, so that the fast lane (-m "not slow and not system") never trains it. Test modules mark
# their own tests that train, start processes or servers (found with --durations=0) with ``pytestmark =
# pytest.mark.system`` or ``@pytest.mark.system``.
TRAINED_RUN_FIXTURES = {
    "tests/report": {"runs", "tiny_run"},
    "tests/serve/label_studio": {"model", "weak_model"},
    "tests/system/hostile": {"trained"},
    "tests/tagger/transformer": {"run"},
}


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests using a trained-run fixture of TRAINED_RUN_FIXTURES are marked ``system``; tests marked ``cuda``
    skip cleanly on a machine without a CUDA GPU."""
    folders = {REPO / folder: names for folder, names in TRAINED_RUN_FIXTURES.items()}
    for item in items:
        for folder, names in folders.items():
            if item.path.is_relative_to(folder) and names.intersection(getattr(item, "fixturenames", ())):
                item.add_marker(pytest.mark.system)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _user_cache_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory):
    """The default elmo.cache_dir is the user's cache folder: the suite (and its subprocesses) fill its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg_cache")))
        yield


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """Commands run in-process may set torch's thread count (``--threads``); no test may leak it to the next."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_bilm_files(tmp_path: Path) -> tuple[Path, Path]:
    """options.json and weights.hdf5 of a tiny random biLM in tmp_path."""
    return save_bilm(random_bilm(), tmp_path / "bilm")
