"""S6, every method's: what of a generation stage's rows is kept (``s6_postprocess/aug.conll``,
``gold+aug.conll``, ``report.json``)."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from aclm.base.augmentation import NoAugmentation
from aclm.base.data import TaggedSentence, write_conll
from aclm.base.io import write_json
from aclm.base.runtime import select_device
from aclm.stages import layout, outputs
from aclm.stages.declare import stage
from aclm.steps.diversity import diversity
from aclm.steps.postprocess import filter_augmentations

log = logging.getLogger("aclm.stages.postprocess")


def nothing_added(c: DictConfig, kept: int, counts: dict) -> str:
    """S6 kept no augmentation: fail, or (``postprocess.on_nothing_added=warn``) the warning its result carries."""
    message = (f"{c.method}: S6 kept none of {kept} generations ({', '.join(f'{k} {v}' for k, v in counts.items())}):"
               f" its S7 is Gold-only's tagger, not an augmented one")
    if c.postprocess.on_nothing_added == "fail":
        raise NoAugmentation(message + "; the run stops here (postprocess.on_nothing_added=warn lets it finish,"
                                       " flagged)")
    log.warning(message)
    return message


@stage(layout.S6, keys=("method", "postprocess", "ner.eval_batch_size"), loads=(layout.S1,))
def postprocess_stage(c: DictConfig, out: Path, data: Path, generations: Path, s1_ner: Path | None = None) -> dict:
    """Filter a generation stage's kept rows (S5's or a baseline's); ``s1_ner``, the gold tagger, is given only
    when the consistency filter is on."""
    train = outputs.gold(data, "train")
    rows = [r for r in outputs.generations(generations) if r["status"] == "kept"]
    candidates = [(TaggedSentence(r["tokens"], r["tags"]), [train[i] for i in r.get("sources", [])])
                  for r in rows]
    predict = None
    if c.postprocess.consistency_filter:
        from aclm.steps.ner import load_tagger, predict_tags

        select_device(c.device)
        tagger = load_tagger(outputs.tagger_model(s1_ner))
        predict = lambda sents: predict_tags(tagger, sents, c.ner.eval_batch_size)  # noqa: E731
    kept, counts = filter_augmentations(candidates, c.postprocess, predict)
    augmentations = [aug for aug, _ in kept]
    warning = None if augmentations else nothing_added(c, len(rows), counts)
    write_conll(out / layout.AUG, augmentations)
    write_conll(out / layout.GOLD_AUG, train + augmentations)
    with_source = [(sources[0], aug) for aug, sources in kept if sources]
    generated = outputs.generation_facts(generations)
    attempts = generated.get("generated", counts["candidates"])
    report = {"method": c.method, "generation": generated, "postprocess": counts, "gold": len(train),
              "added": len(augmentations),
              "dropped_share": round(1 - len(augmentations) / attempts, 4) if attempts else None,
              "diversity": diversity(with_source) if with_source else None,
              **({"warning": warning} if warning else {})}
    write_json(out / layout.REPORT, report)
    return {"added": len(augmentations), **counts}
