"""S1 and S7, training a tagger (on the gold data; on gold + augmentations), and scoring it on the test sets.

Each is a declared stage (:func:`aclm.run.stages.stage`).  Training and
scoring are separate stages, so a new or edited test set re-scores without
re-training.  flair (:mod:`aclm.steps.tagger`) is imported where a tagger
trains or predicts, not with this module: a chain is planned (the grids, the
tables) without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from omegaconf import OmegaConf

from aclm.base.config import config_hash, to_dict
from aclm.base.data import DataError, TaggedSentence, check_label_sets
from aclm.base.datasets import get_spec, load_split
from aclm.base.io import atomic_write_text, write_json
from aclm.base.runtime import library_versions, seed_everything, select_device
from aclm.run import layout, outputs
from aclm.run.gold import test_datasets_read_as, test_files, test_names
from aclm.run.provenance import checkout
from aclm.run.stages import stage, stamp


def train(c, out: Path, data: Path, sentences: list[TaggedSentence]) -> dict:
    """Train on ``sentences`` (dev from the data stage); fail when the tagger learned nothing."""
    from aclm.steps.tagger import check_learned, load_tagger, train_tagger

    seed_everything(c.seed)
    select_device(c.device)
    dev = outputs.gold(data, "dev")
    types = check_label_sets({"train": sentences, "dev": dev})
    model, training = train_tagger(c.ner, sentences, dev, types, out)
    tagger = load_tagger(model)
    dev_scores, dev_predicted = evaluate_on(tagger, dev, c.ner.eval_batch_size, None)
    check_learned(dev_scores["f1"], dev_predicted, c.ner, out)
    return {"train": len(sentences), "dev": len(dev), "dev_f1": dev_scores["f1"], "types": types,
            "training": training}


@stage(layout.S1, keys=("ner", "seed"))
def s1_stage(c, out: Path, data: Path) -> dict:
    return train(c, out, data, outputs.gold(data, "train"))


@stage(layout.S7, keys=("ner", "seed"))
def s7_stage(c, out: Path, data: Path, s6_postprocess: Path) -> dict:
    return train(c, out, data, outputs.gold_and_augmentations(s6_postprocess))


def evaluate_on(tagger, sentences: list[TaggedSentence], batch_size: int, predictions_file: Path | None
                ) -> tuple[dict, list[list[str]]]:
    """Scores on ``sentences`` and the predicted tags (with a progress bar when the predictions are kept)."""
    from aclm.base.metrics import evaluate_tags     # seqeval loads scikit-learn: imported where scores are made
    from aclm.steps.tagger import predict_tags

    predicted = predict_tags(tagger, sentences, batch_size, progress=predictions_file is not None)
    if predictions_file is not None:
        lines = "".join("".join(f"{w}\t{g}\t{p}\n" for w, g, p in zip(s.tokens, s.tags, tags)) + "\n"
                        for s, tags in zip(sentences, predicted))
        atomic_write_text(predictions_file, lines)
    return evaluate_tags([s.tags for s in sentences], predicted), predicted


def chain_record(chain: Mapping[str, Path]) -> tuple[dict, dict]:
    """The config every stage of the chain read (merged, in chain order) and each stage's seconds."""
    config, timings = OmegaConf.create({}), {}
    for d in chain.values():
        record = stamp(d)
        config = OmegaConf.merge(config, record["config"])
        timings[record["stage"]] = record["seconds"]
    return to_dict(config), timings


def learned_nothing(chain: Mapping[str, Path]) -> list[str]:
    """A warning for each tagger of the chain that learned nothing (dev F1 0), which only
    ``ner.on_no_learning=warn`` lets a run go past: S1's makes ACLM's keywords and S6's filter meaningless."""
    taggers = {layout.S1: "S1", layout.S7: "S7"}
    return [f"{name}'s tagger learned nothing (dev F1 0; ner.on_no_learning=warn let the run finish)"
            for stage_name, name in taggers.items()
            if stage_name in chain and outputs.tagger_facts(chain[stage_name]).get("dev_f1") == 0]


EVAL_READS = ("method", "variant", "setting_variant", "profile", "dataset", "gold", "seed", "test_datasets",
              "ner.eval_batch_size")


def evaluate(c, out: Path, tagger_stage: Path, chain: Mapping[str, Path]) -> dict:
    """Score the tagger of ``tagger_stage`` on every test set; ``result.json`` records the whole chain.

    ``chain`` holds every stage run before, by name, in order: their stamps give the config and
    timings recorded, and S6's report (when the chain has one) the augmentation's figures.
    """
    from aclm.base.metrics import evaluate_tags
    from aclm.steps.tagger import load_tagger

    select_device(c.device)
    tests = {name: load_split(name, "test", c.data_dir) for name in test_names(c)}
    tagger = load_tagger(outputs.tagger_model(tagger_stage))
    trained = outputs.tagger_facts(tagger_stage)
    scores, predicted = {}, {}
    for name, sentences in tests.items():
        unseen = set().union(*(s.entity_types for s in sentences)) - set(trained["types"])
        if unseen:   # types the tagger never saw could never be predicted: the score would be silently wrong
            raise DataError(f"test set {name!r} has entity types {sorted(unseen)} that training did not "
                            f"({trained['types']})")
        scores[name], predicted[name] = evaluate_on(tagger, sentences, c.ner.eval_batch_size,
                                                    out / layout.PREDICTIONS / f"{name.replace('/', '_')}.conll")
    own = get_spec(c.dataset).union or [c.dataset]
    # a union dataset is scored on all its members' test sentences at once (micro)
    main = scores[c.dataset] if c.dataset in scores else evaluate_tags(
        [s.tags for k in own for s in tests[k]], [t for k in own for t in predicted[k]])
    config, timings = chain_record(chain)
    report = outputs.augmentation_report(chain[layout.S6]) if layout.S6 in chain else None
    result = {
        "method": c.method, "variant": c.variant, "setting_variant": c.setting_variant, "profile": c.profile,
        "dataset": c.dataset, "gold": c.gold, "seed": c.seed,
        "f1": main["f1"], "precision": main["precision"], "recall": main["recall"], "dev_f1": trained["dev_f1"],
        "training": trained["training"],
        "per_type": main["per_type"], "per_length": main["per_length"],
        "test": scores,
        "timings": timings,
        "sizes": {"gold": outputs.gold_size(chain[layout.DATA]), "train": trained["train"], "dev": trained["dev"],
                  **{f"test:{k}": len(v) for k, v in tests.items()}},
        **({"augmentation": report} if report else {}),
        "warnings": ([report["warning"]] if report and "warning" in report else []) + learned_nothing(chain),
        "config": config, "config_hash": config_hash(config),
        "checkout": checkout(),
        "versions": library_versions(),
    }
    write_json(out / layout.RESULT, result)
    return {"f1": main["f1"]}


@stage(layout.S1_EVAL, keys=EVAL_READS, files=test_files, reads=test_datasets_read_as,
       loads=(layout.S1,))
def s1_eval_stage(c, out: Path, chain: Mapping[str, Path]) -> dict:
    """Gold-only's scores: the S1 tagger's."""
    return evaluate(c, out, chain[layout.S1], chain)


@stage(layout.S7_EVAL, keys=EVAL_READS, files=test_files, reads=test_datasets_read_as,
       loads=(layout.S7,))
def s7_eval_stage(c, out: Path, chain: Mapping[str, Path]) -> dict:
    """A method's scores: the S7 tagger's, trained on gold + its augmentations."""
    return evaluate(c, out, chain[layout.S7], chain)
