"""WikiNEuRal's silver-data baseline (SPEC §3): gold plus as many same-language silver sentences as ACLM
added (R x gold where ACLM has not run). Silver data is PER ORG LOC MISC: CoNLL-style datasets only.
"""

from __future__ import annotations

import random
from pathlib import Path

from omegaconf import DictConfig

from aclm.base.augmentation import Gold, kept_row
from aclm.base.data import check_label_sets
from aclm.base.datasets import get_spec, load_split, resolve_data_dir, run_spec


def silver_name(language: str) -> str:
    return f"wikineural/{language}"


def silver_files(c: DictConfig) -> list[Path]:
    spec = get_spec(silver_name(run_spec(c).language))
    return [spec.path(spec.train, resolve_data_dir(c.data_dir))]


def silver_count(c: DictConfig, gold: Gold) -> int:
    """As many silver sentences as ACLM added in this setting, else R x gold (its attempts)."""
    aclm = gold.needs.get("aclm")
    return aclm["added"] if aclm else c.generation.rounds * len(gold.train)


def augment(c: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    name = silver_name(gold.language)
    silver = load_split(name, "train", c.data_dir)
    check_label_sets({"gold": gold.train, "silver": silver}, reference="gold")
    wanted = silver_count(c, gold)
    if set(gold.types) != {t for s in silver for t in s.entity_types}:
        raise ValueError(f"{name} has types {sorted({t for s in silver for t in s.entity_types})}, "
                         f"{c.dataset} has {gold.types}: the silver baseline needs the same label set")
    chosen = random.Random(c.seed).sample(range(len(silver)), min(wanted, len(silver)))
    return [kept_row(silver[i], [], silver_index=i) for i in chosen], {"requested": wanted, "kept": len(chosen)}
