"""Scores: a trained tagger (S1's for Gold-only, S7's for a method) on every test set of the run; its
``result.json`` records the whole chain (config, timings, augmentation figures, checkout)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from omegaconf import DictConfig, OmegaConf

from aclm.base.data import DataError
from aclm.base.datasets import get_spec, load_split, require_split, resolve_data_dir, run_spec
from aclm.base.dicts import config_hash, to_dict
from aclm.base.io import file_digest, write_json
from aclm.base.runtime import select_device
from aclm.engine import stamp
from aclm.engine.code import checkout
from aclm.stages import layout, outputs
from aclm.stages.declare import stage
from aclm.stages.data import read_as
from aclm.stages.ner import evaluate_on


def test_names(c: DictConfig) -> list[str]:
    """The datasets a run is scored on: its own (a union's members) and ``test_datasets``."""
    own = get_spec(c.dataset).union or [c.dataset]
    return own + [d for d in c.test_datasets if d not in own]


def test_datasets_read_as(c: DictConfig) -> dict:
    """How the test sets a run is scored on are read: what scoring depends on beyond their files."""
    return read_as([run_spec(c, name) for name in test_names(c)])


def test_files(c: DictConfig) -> list[Path]:
    """The test files a run is scored on (hashed by content: an edited test set re-scores)."""
    base = resolve_data_dir(c.data_dir)
    files = []
    for name in test_names(c):
        files.append(get_spec(name).path(require_split(name, "test"), base))
    return files


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


def what_ran(chain: Mapping[str, Path], config: dict) -> tuple[dict, list[str]]:
    """What ACLM's S2 and S5 did (keywords kept, templates mixed), and a warning for a setting that made the run
    another method under this one's name (``keywords.p=0``: ACLM only entity; mixner that never mixes)."""
    ran, warnings = {}, []
    if layout.S2 in chain:
        ran["keywords"] = sum(split.get("keywords", 0) for split in outputs.facts(chain[layout.S2]).values())
        if not ran["keywords"] and config["keywords"]["selection"] != "none":
            warnings.append(f"S2 kept no keyword (keywords.p={config['keywords']['p']}, keywords.max_subtokens="
                            f"{config['keywords']['max_subtokens']}): this run is ACLM only entity under its name")
    if layout.S5 in chain:
        ran["mixed"] = outputs.facts(chain[layout.S5]).get("mixed", 0)
        mixner = config["generation"]["mixner"]
        if not ran["mixed"] and mixner["mode"] != "off":
            warnings.append(f"S5 mixed no template (generation.mixner: mode {mixner['mode']}, beta {mixner['beta']}, "
                            f"gamma_sigma {mixner['gamma_sigma']}): this run is mixner off under its name")
    return ran, warnings


EVAL_KEYS = ("method", "variant", "setting_variant", "profile", "dataset", "gold", "seed", "test_datasets",
              "ner.eval_batch_size")


def evaluate(c, out: Path, tagger_stage: Path, chain: Mapping[str, Path]) -> dict:
    """Score the tagger of ``tagger_stage`` on every test set; ``chain`` (every earlier stage by name) gives the
    config, timings and augmentation figures result.json records."""
    from aclm.steps.ner import load_tagger

    select_device(c.device)
    tagger = load_tagger(outputs.tagger_model(tagger_stage))
    return record(c, out, chain, outputs.tagger_facts(tagger_stage),
                  lambda sentences, kept: evaluate_on(tagger, sentences, c.ner.eval_batch_size, kept))


Score = Callable[[list, Path], tuple[dict, list[list[str]]]]


def record(c, out: Path, chain: Mapping[str, Path], trained: dict, score: Score) -> dict:
    """Score on every test set of the run with ``score(sentences, predictions_file) -> (scores, tags)`` a tagger
    whose training recorded ``trained`` (sentences, dev F1, types, training); write ``result.json``."""
    from aclm.base.metrics import evaluate_tags

    tests = {name: load_split(name, "test", c.data_dir) for name in test_names(c)}
    scores, predicted = {}, {}
    for name, sentences in tests.items():
        unseen = set().union(*(s.entity_types for s in sentences)) - set(trained["types"])
        if unseen:   # types the tagger never saw could never be predicted: the score would be silently wrong
            raise DataError(f"test set {name!r} has entity types {sorted(unseen)} that training did not "
                            f"({trained['types']})")
        scores[name], predicted[name] = score(sentences, out / layout.PREDICTIONS / f"{name.replace('/', '_')}.conll")
    own = get_spec(c.dataset).union or [c.dataset]
    # a union dataset is scored on all its members' test sentences at once (micro)
    main = scores[c.dataset] if c.dataset in scores else evaluate_tags(
        [s.tags for k in own for s in tests[k]], [t for k in own for t in predicted[k]])
    config, timings = chain_record(chain)
    report = outputs.augmentation_report(chain[layout.S6]) if layout.S6 in chain else None
    ran, degenerate = what_ran(chain, config)
    data = {"gold": stamp(chain[layout.DATA])["identity"]["inputs"],
            "test": {name: file_digest(path) for name, path in zip(test_names(c), test_files(c))}}
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
        **({"augmentation": report} if report else {}), **({"ran": ran} if ran else {}), "data": data,
        "warnings": ([report["warning"]] if report and "warning" in report else []) + learned_nothing(chain)
        + degenerate,
        "config": config, "config_hash": config_hash(config),
        "checkout": checkout(),
        "versions": checkout()["versions"],
    }
    write_json(out / layout.RESULT, result)
    return {"f1": main["f1"]}


@stage(layout.S1_EVAL, keys=EVAL_KEYS, files=test_files, reads=test_datasets_read_as,
       loads=(layout.S1,))
def s1_eval_stage(c, out: Path, chain: Mapping[str, Path]) -> dict:
    """Gold-only's scores: the S1 tagger's."""
    return evaluate(c, out, chain[layout.S1], chain)


@stage(layout.S7_EVAL, keys=EVAL_KEYS, files=test_files, reads=test_datasets_read_as,
       loads=(layout.S7,))
def s7_eval_stage(c, out: Path, chain: Mapping[str, Path]) -> dict:
    """A method's scores: the S7 tagger's, trained on gold + its augmentations."""
    return evaluate(c, out, chain[layout.S7], chain)
