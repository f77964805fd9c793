"""Folders named after what a run's overrides change, so that no run replaces another's results.

An override that changes what a stage computes names a folder of its own: the setting folder
(``seed1@ner.epochs=2/``, where S1 trains again) when a stage every method of the setting shares reads it, else
the method folder (``aclm@generator.epochs=10/``, unless ``variant=`` names it).  Keys no stage reads, the extra
``test_datasets`` and values equal to the profile's name nothing.  A name over :data:`MAX_NAME` characters
becomes a digest; result.json records the overrides in full.  For users: docs/reproducing.md ("Folders").
"""

from __future__ import annotations

import copy
import json
import re
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base.config import load_config, read_config_file
from aclm.base.dicts import config_hash, flatten, to_dict
from aclm.stages import layout
from aclm.run.chain import chain
from aclm.stages.layout import SHARED

#: What says which run it is, not how it runs: never part of a folder's name.
COORDINATES = ("profile", "method", "dataset", "gold", "seed", "variant", "setting_variant", "data_dir",
               "run_dir", "device", "tensorboard", "test_datasets")
MAX_NAME = 80


def overridden_keys(overrides: Sequence[str], config_files: Sequence[str] = ()) -> list[str]:
    """The dotted keys the command line and the extra files (with the files they inherit) set."""
    keys = {word.split("=", 1)[0] for word in overrides}
    for path in config_files:
        keys.update(flatten(to_dict(read_config_file(path))))
    return sorted(k for k in keys if k.split(".")[0] not in COORDINATES)


def stage_views(cfg: DictConfig) -> tuple[dict, dict]:
    """What the shared stages and the method's own compute from: each stage's fingerprinted config, links resolved."""
    shared, own = {}, {}
    for step in chain(cfg):
        (shared if step.name in SHARED else own)[step.name] = step.stage.fingerprint(cfg)
    return shared, own


def folder_name(pairs: dict[str, object]) -> str:
    """``key=value,key=value`` (sorted), made safe for a path; a digest when too long.  A name whose
    characters had to be replaced ends in a digest of the values, so ``a/b`` and ``a_b`` name two folders."""
    text = ",".join(f"{k}={v if isinstance(v, (str, int, float, bool)) else json.dumps(v, separators=(',', ':'))}"
                    for k, v in sorted(pairs.items()))
    safe = re.sub(r"[^\w.,=+-]", "_", text)
    if safe != text:
        safe += f"+{config_hash(pairs)[:6]}"
    return safe if len(safe) <= MAX_NAME else f"{len(pairs)}keys-{config_hash(pairs)[:10]}"


def name_run(cfg: DictConfig, overrides: Sequence[str], config_files: Sequence[str] = ()) -> DictConfig:
    """Set ``setting_variant`` and (unless given) ``variant`` from the overrides that change what a stage computes.
    Each key is tried alone on the profile, so it names a folder through links (``${generator.epochs}``) too."""
    keys = overridden_keys(overrides, config_files)
    if not keys:
        return cfg
    given = [w for w in overrides if w.split("=", 1)[0] in ("profile", "method", "dataset", "gold", "seed")]
    base = load_config(given)
    shared, own = stage_views(base)
    setting, method = {}, {}
    for key in keys:
        value = to_dict(OmegaConf.select(cfg, key))
        if value == to_dict(OmegaConf.select(base, key)):
            continue
        probe = copy.deepcopy(base)
        OmegaConf.update(probe, key, OmegaConf.select(cfg, key), force_add=True)
        probe_shared, probe_own = stage_views(probe)
        if probe_shared != shared:
            setting[key] = value
        elif probe_own != own:
            method[key] = value
    explicit = {w.split("=", 1)[0] for w in overrides}
    if setting and "setting_variant" not in explicit:
        cfg.setting_variant = folder_name(setting)
    if method and "variant" not in explicit and cfg.method != layout.GOLD_ONLY:
        cfg.variant = folder_name(method)
    return cfg


def run_config(overrides: Sequence[str], config_files: Sequence[str] = ()) -> DictConfig:
    """The config a command line gives, its folders named: what every stage script runs."""
    return name_run(load_config(list(overrides), list(config_files)), overrides, config_files)
