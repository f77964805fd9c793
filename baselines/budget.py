"""Gold-only with ACLM's training budget: gold plus as many gold copies as ACLM added (docs/reproducing.md).

At 100 gold ACLM's S7 makes 2-6x Gold-only's updates, and part of a gain may be those updates (Piedboeuf
and Langlais, 2024; DAGA's authors also train on gold copied several times). Same sentences per epoch, so
the same updates. Copies go round the gold set in a seeded order, each repeated equally, give or take one.
"""

from __future__ import annotations

import random

from omegaconf import DictConfig

from aclm.base.augmentation import Gold, kept_row
from aclm.base.runtime import RunError


def augment(c: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    """Gold copies, as many as ACLM added in this setting."""
    if not gold.train:
        raise ValueError("the gold set is empty: nothing to repeat")
    if "aclm" not in gold.needs:
        raise RunError("gold_only_budget repeats gold to ACLM's size in the same setting, and ACLM has not run "
                         "there: run method=aclm first (same profile, dataset, gold and seed)")
    wanted = gold.needs["aclm"]["added"]
    order = list(range(len(gold.train)))
    random.Random(c.seed).shuffle(order)
    picks = [order[k % len(order)] for k in range(wanted)]
    rows = [kept_row(gold.train[i], [i], copy_of=i) for i in picks]
    return rows, {"requested": wanted, "kept": len(rows), "copies_per_gold": round(wanted / len(gold.train), 3)}
