"""A baseline's one generation stage (``augment/generations.jsonl``): its ``augment(cfg, gold)`` function,
named in the method table (:mod:`aclm.base.registry`), with the config keys its entry names."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from aclm.base import registry
from aclm.base.augmentation import Gold
from aclm.base.datasets import run_spec
from aclm.base.io import write_jsonl
from aclm.base.runtime import seed_everything, select_device
from aclm.stages import layout, outputs
from aclm.stages.declare import stage


def augment_keys(cfg) -> tuple[str, ...]:
    """The config keys a baseline's augment stage reads: its table entry's, what names the run, and the
    language given to a dataset folder (only when given: a run without it keeps its identity)."""
    return ("method", "dataset", "seed", *(["language"] if cfg.language else []), *registry.get(cfg.method).keys)


def input_files(c: DictConfig) -> list[Path]:
    """The raw files its method reads beyond the gold sample (hashed by content), as its entry names them."""
    files = registry.get(c.method).input_files()
    return files(c) if files else []


@stage(layout.AUGMENT, keys=augment_keys, files=input_files, code=lambda cfg: registry.get(cfg.method).code_modules())
def augment_stage(c: DictConfig, out: Path, data: Path, needs: tuple[Path, ...] = ()) -> dict:
    """``needs``: the S6 folders of the methods it needs that ran; their reports reach the method as ``gold.needs``."""
    seed_everything(c.seed)
    gold = Gold(outputs.gold(data, "train"), outputs.gold(data, "dev"), outputs.entity_types(data),
                run_spec(c).language, outputs.sentence_languages(data, "train"),
                outputs.sentence_languages(data, "dev"), select_device(c.device), out,
                {d.parent.name: outputs.augmentation_report(d) for d in needs})
    rows, counts = registry.get(c.method).augmenter()(c, gold)
    write_jsonl(out / layout.GENERATIONS, rows)
    return counts
