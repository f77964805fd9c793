"""Which stages make up each method; the one place that maps a method name to code.

Every augmentation method ends the same way: its generation stage writes
``generations.jsonl``, the shared S6 filters it, S7 trains and evaluates.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from aclm import experiment as ex
from aclm import pipeline

ACLM_METHODS = ("aclm", "aclm_random", "aclm_only_entity")


def generation_stage(cfg: DictConfig, force: bool = False) -> Path:
    """Run (or reuse) the method's own generation stage; returns its directory."""
    if cfg.method in ACLM_METHODS:
        return pipeline.generate_stage(cfg, force=force)
    raise NotImplementedError(f"method {cfg.method!r} has no generation stage yet")


def run_method(cfg: DictConfig) -> Path:
    """All stages of ``cfg.method`` for one setting; returns the directory of its result.json."""
    if cfg.method == "gold_only":
        return ex.s1_stage(cfg)
    ex.s1_stage(cfg)
    pipeline.postprocess_stage(cfg, generation_stage(cfg))
    return ex.s7_stage(cfg)
