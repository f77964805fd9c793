"""S7 with its learning rate chosen on dev: the tagger a fair comparison trains (``tuning.*``).

Augmentation's gains shrink once the baseline is trained as well as the augmented runs (Piedboeuf & Langlais,
COLING 2025): a learning rate chosen on dev and a long patience.  One tagger per rate of ``tuning.learning_rates``
(none: ``ner.lr``), with ``tuning.anneal_patience`` where given; the best on dev is kept (the first on a tie).
It trains on gold alone (``gold_only_tuned``) or on S6's gold + augmentations.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from aclm.stages import layout, outputs
from aclm.stages.declare import stage
from aclm.stages.ner import train


def recipe(c: DictConfig, lr: float) -> DictConfig:
    """The run's config with the tagger's rate and patience as tuning says; a candidate that learns nothing is
    only a worse candidate (the kept one is checked with the run's own ``ner.on_no_learning``)."""
    patience = c.tuning.anneal_patience
    ner = {"lr": lr, "on_no_learning": "warn", **({} if patience is None else {"anneal_patience": patience})}
    return OmegaConf.merge(c, {"ner": ner})


@stage(layout.S7, keys=("ner", "seed", "tuning"))
def s7_tuned_stage(c, out: Path, data: Path, s6_postprocess: Path | None = None) -> dict:
    from aclm.steps.ner import NoLearning

    sentences = outputs.gold(data, "train") if s6_postprocess is None else outputs.gold_and_augmentations(
        s6_postprocess)
    tried = {lr: train(recipe(c, lr), out / f"lr-{lr}", data, sentences)
             for lr in c.tuning.learning_rates or [c.ner.lr]}
    best = max(tried, key=lambda lr: tried[lr]["dev_f1"])         # max keeps the first of equals
    if tried[best]["dev_f1"] == 0 and c.ner.on_no_learning == "fail":
        raise NoLearning(f"{out}: the tagger learned nothing at any learning rate of tuning.learning_rates "
                         f"({', '.join(map(str, tried))}): dev F1 0 at each; check the recipe (ner.*)")
    (out / f"lr-{best}" / layout.MODEL).rename(out / layout.MODEL)
    for lr in tried:                    # each candidate's loss.tsv stays: its dev curve
        (out / f"lr-{lr}" / layout.MODEL).unlink(missing_ok=True)
    chosen = tried[best]
    return {**chosen, "training": {**chosen["training"], "chosen_lr": best,
                                   "dev_f1_by_lr": {str(lr): facts["dev_f1"] for lr, facts in tried.items()}}}
