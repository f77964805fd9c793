"""Folders named after what a run's overrides change, so that no run replaces another's results.

The profile as it is runs in ``<run_dir>/<profile>/<dataset>/gold<N>/seed<S>/`` and its method folder
``<method>/``.  An override on the command line (or in a ``--config`` file) that changes a value some
stage of the run reads names a folder of its own:

* a key read by a stage all methods of the setting share (the gold sample's, S1's: ``splits.*``,
  ``ner.*``) names the setting folder, ``seed1@ner.epochs=2/``, where S1 trains again;
* a key only the method's own stages read names the method folder, ``aclm@generator.epochs=10/``,
  unless ``variant=`` names it;
* a key no stage reads (``storage.*``, ``device``, where files live), the extra test sets
  (``test_datasets``: they add scores and change no training) and a value equal to the profile's
  name nothing.

A name longer than :data:`MAX_NAME` characters is shortened to a digest; ``result.json`` records
the overrides in full.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base.config import config_hash, flatten, load_config, to_dict
from aclm.run import layout
from aclm.run.chain import chain
from aclm.run.stages import SHARED

#: What says which run it is, not how it runs: never part of a folder's name.
COORDINATES = ("profile", "method", "dataset", "gold", "seed", "variant", "setting_variant", "data_dir",
               "run_dir", "device", "tensorboard", "test_datasets")
MAX_NAME = 80


def overridden_keys(overrides: Sequence[str], config_files: Sequence[str] = ()) -> list[str]:
    """The dotted keys the command line and the extra files set."""
    keys = {word.split("=", 1)[0] for word in overrides}
    for path in config_files:
        keys.update(flatten(to_dict(OmegaConf.load(path))))
    return sorted(k for k in keys if k.split(".")[0] not in COORDINATES)


def _reads(keys: Iterable[str], key: str) -> bool:
    return any(key == r or key.startswith(r + ".") or r.startswith(key + ".") for r in keys)


def stage_keys(cfg: DictConfig) -> tuple[set[str], set[str]]:
    """The config keys the setting's shared stages read, and those only the method's own stages read."""
    shared, own = set(), set()
    for step in chain(cfg):
        (shared if step.name in SHARED else own).update(step.config_keys(cfg))
    return shared, own


def folder_name(pairs: dict[str, object]) -> str:
    """``key=value,key=value`` (sorted), made safe for a path; a digest when too long."""
    text = ",".join(f"{k}={v if isinstance(v, (str, int, float, bool)) else json.dumps(v, separators=(',', ':'))}"
                    for k, v in sorted(pairs.items()))
    text = re.sub(r"[^\w.,=+-]", "_", text)
    return text if len(text) <= MAX_NAME else f"{len(pairs)}keys-{config_hash(pairs)[:10]}"


def name_run(cfg: DictConfig, overrides: Sequence[str], config_files: Sequence[str] = ()) -> DictConfig:
    """Set ``setting_variant`` and (unless given) ``variant`` from the overrides that change a value."""
    keys = overridden_keys(overrides, config_files)
    if not keys:
        return cfg
    given = [w for w in overrides if w.split("=", 1)[0] in ("profile", "method", "dataset", "gold", "seed")]
    base = load_config(given)
    changed = {k: to_dict(OmegaConf.select(cfg, k)) for k in keys
               if to_dict(OmegaConf.select(cfg, k)) != to_dict(OmegaConf.select(base, k))}
    shared, own = stage_keys(cfg)
    setting = {k: v for k, v in changed.items() if _reads(shared, k)}
    method = {k: v for k, v in changed.items() if k not in setting and _reads(own, k)}
    explicit = {w.split("=", 1)[0] for w in overrides}
    if setting and "setting_variant" not in explicit:
        cfg.setting_variant = folder_name(setting)
    if method and "variant" not in explicit and cfg.method != layout.GOLD_ONLY:
        cfg.variant = folder_name(method)
    return cfg


def run_config(overrides: Sequence[str], config_files: Sequence[str] = ()) -> DictConfig:
    """The config a command line gives, its folders named: what every stage script runs."""
    return name_run(load_config(list(overrides), list(config_files)), overrides, config_files)
