"""How this project's stages are declared: where each writes (:mod:`aclm.stages.layout`), the setting's
lock around the stages every method shares, and the schema's defaults (a new key at its default re-runs
nothing).  It decides where a stage runs, never what it computes: no stage's code identity holds it."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import MISSING, is_dataclass
from functools import lru_cache, partial

from omegaconf import MISSING as NO_VALUE

from aclm.base.config import schema_keys
from aclm.base.datasets import resolve_data_dir, run_spec
from aclm.engine import Place, folder_lock
from aclm.engine import stage as engine_stage
from aclm.stages.layout import SHARED, RunLayout


@lru_cache(maxsize=1)
def defaults() -> dict:
    """Each schema key's default, where it has one (a section's keys, not the section)."""
    found = {}
    for name, f in schema_keys().items():
        if f.default is not MISSING and f.default != NO_VALUE:
            found[name] = f.default
        elif f.default_factory is not MISSING and not is_dataclass(f.default_factory):
            found[name] = f.default_factory()
    return found


def place(cfg, name: str) -> Place:
    here = RunLayout.of(cfg)
    lock = partial(folder_lock, here.root, "setting", here.root, wait=True) if name in SHARED else nullcontext
    return Place(here.stage(name), (here.root, resolve_data_dir(cfg.data_dir)), lock, defaults(),
                 f"{name}@{language(cfg)}")


def language(cfg) -> str:
    """The run's language, which S4's and S5's GPU memory depends on (their lease name); empty for a
    dataset not found here (results read elsewhere: nothing runs)."""
    try:
        return run_spec(cfg).language
    except KeyError:
        return ""


stage = partial(engine_stage, place=place)
