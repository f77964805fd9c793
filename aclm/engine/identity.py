"""What a stage's output depends on, each part by content: the identity a stamp holds.

Config: the keys the stage declares, as a read-only view; where files live (:data:`ENVIRONMENT`) is in every
view and no identity, and a key a stamp lacks whose value is its schema default is no change.  Inputs: a raw
file by its bytes, named by its path below the setting or data folder as written (a folder of symlinks to the
same files is the same input); an earlier stage's folder by its stamp.  Models: a local folder by its files'
bytes, a hub name by its cached snapshot's commit.  Code and version: :mod:`aclm.engine.code`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base.dicts import flatten, to_dict
from aclm.base.io import file_digest
from aclm.base.models import hub_revision, is_hub_id, model_path

STAMP = "_stage.json"
ENVIRONMENT = ("data_dir", "run_dir", "device", "tensorboard")
#: How a hub model's identity is recorded: the commit of its cached snapshot (None: not downloaded yet).
HUB_REVISION = "hub revision"


def view(cfg: DictConfig, keys: Sequence[str]) -> DictConfig:
    """A read-only config holding only ``keys`` (dotted paths) and :data:`ENVIRONMENT`."""
    out = OmegaConf.create({})
    for key in (*keys, *ENVIRONMENT):
        OmegaConf.update(out, key, to_dict(OmegaConf.select(cfg, key, throw_on_missing=True)), force_add=True)
    OmegaConf.set_struct(out, True)
    OmegaConf.set_readonly(out, True)
    return out


def hashed(config: DictConfig) -> dict:
    """What a stage's fingerprint holds of its view: all but :data:`ENVIRONMENT`."""
    return {k: v for k, v in to_dict(config).items() if k not in ENVIRONMENT}


def folder_digests(folder: Path, skip: Sequence[str] = ()) -> dict[str, str]:
    """Each file below ``folder`` (through symlinks) by relative path -> digest, bar the top-level names ``skip``."""
    return {str(p.relative_to(folder)): file_digest(p) for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and p.relative_to(folder).parts[0] not in skip}


def input_digest(path: Path) -> str:
    """A stage folder by its stamp, a file by its bytes, another folder by its files' names and bytes."""
    path = Path(path)
    if (path / STAMP).is_file():
        return file_digest(path / STAMP)
    if path.is_file():
        return file_digest(path)
    return hashlib.sha256(repr(sorted(folder_digests(path).items())).encode()).hexdigest()


def input_name(path: Path, roots: Sequence[Path]) -> str:
    """An input's name in a stamp: its path below the first of ``roots`` holding it, as written (a symlink
    is not followed), else its full path."""
    for root in roots:
        relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        if not relative.startswith(".."):
            return relative
    return str(path)


def model_reads(config: Mapping[str, Any]) -> dict[str, dict]:
    """The models a stage's config names: a local folder by its files' content, a hub name by its snapshot's commit."""
    found = {}
    for key, value in flatten(dict(config)).items():
        last = key.rpartition(".")[2]
        if isinstance(value, str) and (last in ("model", "embedder") or last.endswith("_model")):
            folder = Path(model_path(value))
            if folder.is_dir():
                found[f"model {key}"] = folder_digests(folder)
            elif is_hub_id(value):
                found[f"model {key}"] = {HUB_REVISION: hub_revision(value)}
    return found


def identity(config: Mapping, inputs: Sequence[Path], roots: Sequence[Path] = (), code: Mapping | None = None,
             version: int = 1, reads: Mapping | None = None) -> dict:
    """Everything a stage's outputs depend on: config view, inputs, code, version and what else it reads."""
    missing = [str(p) for p in inputs if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"stage inputs missing: {missing}")
    return {"config": to_dict(config), "inputs": {input_name(p, roots): input_digest(p) for p in inputs},
            "code": dict(code or {}), "version": version, **({"reads": dict(reads)} if reads else {})}


def _changed(old: Mapping, new: Mapping) -> list[str]:
    return sorted(k for k in {*old, *new} if old.get(k) != new.get(k))


def differences(before: dict, now: dict, defaults: Mapping[str, Any] = {}) -> str | None:
    """Why identity ``now`` is not ``before`` (None: the same); ``defaults``: the schema's default per key."""
    old, new = flatten(before["config"]), flatten(now["config"])
    added = {k for k in new.keys() - old.keys() if k in defaults and new[k] == defaults[k]}
    reasons = [f"{what} changed: {', '.join(keys)}" for what, keys in (
        ("config", _changed(old, {k: v for k, v in new.items() if k not in added})),
        ("code", _changed(before["code"], now["code"])), ("input", _changed(before["inputs"], now["inputs"])))
        if keys]
    if before["version"] != now["version"]:
        reasons.append(f"stage version {before['version']} -> {now['version']}")
    reads = _changed(before.get("reads", {}), now.get("reads", {}))
    reasons += [f"changed: {', '.join(reads)}"] if reads else []
    return "; ".join(reasons) or None
