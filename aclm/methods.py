"""Which stages make up each method; the one place that maps a method name to code.

Every augmentation method ends the same way: its own generation stage writes
``generations.jsonl`` (rows with ``status``; kept rows carry ``tokens``,
``tags`` and ``sources``, the indices of the gold sentences they came from),
the shared S6 filters it, and S7 trains and evaluates on gold + kept.

A baseline is one function ``augment(cfg, gold: Gold) -> (rows, counts)``
registered in ``AUGMENTERS``; this module runs it as a cached stage in
``<run>/<method>/augment/``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from aclm import experiment as ex
from aclm import pipeline
from aclm.augmentation import Gold, kept_row
from aclm.data import check_label_sets, read_conll
from aclm.datasets import get_spec, load_split
from aclm.io import read_json, write_jsonl
from aclm.runtime import seed_everything, select_device
from aclm.stages import run_stage

ACLM_METHODS = ("aclm", "aclm_random", "aclm_only_entity")


def lwtr(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    from baselines import lwtr as method

    augmented, counts = method.augment(gold.train, cfg.lwtr.p, cfg.generation.rounds, cfg.seed)
    return [kept_row(s, [s.meta["source_index"]], round=s.meta["round"]) for s in augmented], counts


def daga(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    from baselines import daga as method

    generated, counts = method.generate(gold.train, cfg.daga, cfg.generation.rounds, cfg.seed, gold.device)
    return [kept_row(s, []) for s in generated], counts


def mulda(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    from baselines import mulda as method

    return method.augment(cfg, gold)


def melm(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    from melm import augment as method

    return method.augment(cfg, gold)


def silver_count(cfg: DictConfig, gold: Gold) -> int:
    """As many silver sentences as ACLM added in this setting, else R x gold (its attempts)."""
    report = ex.run_root(cfg) / "aclm" / "s6_postprocess" / "report.json"
    return read_json(report)["added"] if report.exists() else cfg.generation.rounds * len(gold.train)


def wikineural(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    """WikiNEuRal's silver-data baseline: gold plus silver sentences of the same language."""
    name = f"wikineural/{gold.language}"
    silver = load_split(name, "train", cfg.data_dir)
    check_label_sets({"gold": gold.train, "silver": silver}, reference="gold")
    wanted = silver_count(cfg, gold)
    if set(gold.types) != {t for s in silver for t in s.entity_types}:
        raise ValueError(f"{name} has types {sorted({t for s in silver for t in s.entity_types})}, "
                         f"{cfg.dataset} has {gold.types}: the silver baseline needs the same label set")
    chosen = random.Random(cfg.seed).sample(range(len(silver)), min(wanted, len(silver)))
    return [kept_row(silver[i], [], silver_index=i) for i in chosen], {"requested": wanted, "kept": len(chosen)}


AUGMENTERS: dict[str, Callable[[DictConfig, Gold], tuple[list[dict], dict]]] = {
    "lwtr": lwtr, "daga": daga, "mulda": mulda, "melm": melm, "wikineural": wikineural}
METHOD_SECTIONS = {"lwtr": ("lwtr", "generation"), "daga": ("daga", "generation"),
                   "mulda": ("generator", "generation"), "melm": ("melm",), "wikineural": ("generation",)}


def augment_stage(cfg: DictConfig, force: bool = False) -> Path:
    out = ex.method_dir(cfg) / "augment"
    data = ex.data_stage(cfg)
    inputs = [data]
    if cfg.method == "wikineural":
        aclm_report = ex.run_root(cfg) / "aclm" / "s6_postprocess"
        inputs += [aclm_report] if aclm_report.exists() else []

    def build(tmp: Path) -> dict:
        seed_everything(cfg.seed)
        gold = Gold(read_conll(data / "train.conll"), read_conll(data / "dev.conll"),
                    ex.entity_types(cfg), get_spec(cfg.dataset).language,
                    ex.sentence_languages(cfg, "train"), ex.sentence_languages(cfg, "dev"),
                    select_device(cfg.device), tmp)
        rows, counts = AUGMENTERS[cfg.method](cfg, gold)
        write_jsonl(tmp / "generations.jsonl", rows)
        return counts

    section = {"method": cfg.method, "seed": cfg.seed, **{k: cfg[k] for k in METHOD_SECTIONS[cfg.method]}}
    run_stage(f"augment_{cfg.method}", out, section, inputs, build, force=force)
    return out


def generation_stage(cfg: DictConfig, force: bool = False) -> Path:
    """Run (or reuse) the method's own generation stage; returns its directory."""
    if cfg.method in ACLM_METHODS:
        return pipeline.generate_stage(cfg, force=force)
    if cfg.method in AUGMENTERS:
        return augment_stage(cfg, force=force)
    raise ValueError(f"method {cfg.method!r} generates nothing")


def run_method(cfg: DictConfig) -> Path:
    """All stages of ``cfg.method`` for one setting; returns the directory of its result.json."""
    s1 = ex.s1_stage(cfg)
    if cfg.method == "gold_only":
        return s1
    pipeline.postprocess_stage(cfg, generation_stage(cfg))
    return ex.s7_stage(cfg)
