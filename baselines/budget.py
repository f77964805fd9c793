"""Gold-only with an augmented run's training budget: the gold sentences repeated.

An augmented S7 trains on gold plus what S6 added, for the same epochs as
Gold-only: at 100 gold, ACLM's S7 makes about 2-6 times Gold-only's updates.
Part of a gain may be those updates, not the new sentences (Piedboeuf and
Langlais, 2024: classic augmentation gains vanish when the baseline trains
longer; DAGA's authors train on gold copied several times plus augmentation).
This control trains the Gold-only tagger on gold plus as many gold copies as
ACLM added in the same setting (its S6 report): the same sentences per epoch,
so the same optimizer updates per epoch, with the same batch size and
schedule.  Copies go round the gold set in a seeded order, so each sentence is
repeated as often as any other, give or take one.
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
