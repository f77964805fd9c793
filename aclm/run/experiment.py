"""The stages every method shares: the gold data (S0), training a tagger (S1 on
the gold data, S7 on gold + augmentations) and scoring it on the test sets.

Each is a declared stage (:func:`aclm.run.stages.stage`): its code sees only the
config keys it reads, and its raw inputs (data files, test sets) are hashed
by content.  Training and scoring are separate stages, so a new or edited
test set re-scores without re-training.  Where the directories are:
:mod:`aclm.run.layout`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from aclm.base import splits
from aclm.base.config import config_hash, to_dict
from aclm.base.data import DataError, TaggedSentence, check_label_sets, read_conll, type_counts, write_conll
from aclm.base.datasets import get_spec, load_split, require_split, resolve_data_dir
from aclm.base.io import atomic_write_text, read_json, write_json
from aclm.base.metrics import evaluate_tags
from aclm.base.runtime import library_versions, seed_everything, select_device
from aclm.run import layout
from aclm.run.stages import STAMP, stage
from aclm.run.tagger import check_learned, load_tagger, predict_tags, train_tagger

log = logging.getLogger("aclm.run.experiment")
DATA_READS = ("dataset", "language", "gold", "splits.source", "splits.seed", "splits.dev_size")


def member_config(cfg: DictConfig, member: str) -> DictConfig:
    """The config of one member of a union dataset (the multilingual setting)."""
    return OmegaConf.create({**to_dict(cfg), "dataset": member})


def dataset_files(cfg: DictConfig) -> list[Path]:
    """The raw files a setting's gold data is cut from (the data stage's inputs)."""
    spec = get_spec(cfg.dataset)
    if spec.union:
        return [f for member in spec.union for f in dataset_files(member_config(cfg, member))]
    base = resolve_data_dir(cfg.data_dir)
    rels = [spec.samples[cfg.gold], spec.dev] if sample_source(cfg) == "released" else [spec.train, spec.dev]
    return [spec.path(r, base) for r in rels if r]


def sample_source(cfg: DictConfig) -> str:
    """``released`` or ``stratified``: where this setting's gold sample comes from.

    ``auto`` (the default) reads the authors' released sample when the dataset
    ships one of this size (one fixed sample: the seeds then vary training
    only, as in the paper) and draws a stratified one with ``splits.seed``
    otherwise.  ``gold=full`` uses the whole train set either way.
    """
    if cfg.gold == "full":
        return "full"
    shipped = cfg.gold in get_spec(cfg.dataset).samples
    if cfg.splits.source == "released" and not shipped:
        raise ValueError(f"{cfg.dataset} ships no released sample of {cfg.gold}; use splits.source=stratified")
    if cfg.splits.source == "auto":
        return "released" if shipped else "stratified"
    return cfg.splits.source


# --- S0: the gold sample -----------------------------------------------------------------

def gold_data(cfg: DictConfig) -> tuple[list[TaggedSentence], list[TaggedSentence]]:
    """Train and dev sentences for this setting, as the split config says.

    Every sentence records its language in ``meta``; a union dataset is the
    concatenation of its members' samples.
    """
    spec = get_spec(cfg.dataset)
    if spec.union:
        parts = [gold_data(member_config(cfg, member)) for member in spec.union]
        return [s for train, _ in parts for s in train], [s for _, dev in parts for s in dev]
    train, dev = _single_gold_data(cfg, spec)
    for s in train + dev:
        s.meta["language"] = spec.language
    return train, dev


def _single_gold_data(cfg: DictConfig, spec) -> tuple[list[TaggedSentence], list[TaggedSentence]]:
    source, seed = sample_source(cfg), cfg.splits.seed
    dev = load_split(cfg.dataset, "dev", cfg.data_dir)
    full = load_split(cfg.dataset, "train", cfg.data_dir) if source != "released" or dev is None else []
    if source == "full":
        train, used = full, set()
    elif source == "released":
        train, used = load_split(cfg.dataset, cfg.gold, cfg.data_dir), set()
    else:
        chosen = splits.stratified_indices(full, cfg.gold, seed)
        train, used = [full[i] for i in chosen], set(chosen)
    size = cfg.splits.dev_size
    if size == "gold":
        size = len(train) if cfg.gold != "full" else None
    if dev is None:  # carve a dev set out of what the gold sample left
        dev = splits.sample(full, size or len(full) // 10, seed, exclude=used)
        if cfg.gold == "full":
            dev_ids = {id(s) for s in dev}
            train = [s for s in full if id(s) not in dev_ids]
    elif size and size < len(dev):
        dev = splits.sample(dev, size, seed)
    return train, dev


@stage(layout.DATA, reads=DATA_READS, files=dataset_files)
def data_stage(c: DictConfig, out: Path) -> dict:
    train, dev = gold_data(c)
    types = check_label_sets({"train": train, "dev": dev})
    write_conll(out / "train.conll", train)
    write_conll(out / "dev.conll", dev)
    write_json(out / "languages.json", {"train": [s.meta["language"] for s in train],
                                         "dev": [s.meta["language"] for s in dev]})
    return {"train": len(train), "dev": len(dev), "types": types, "source": sample_source(c),
            "type_counts": dict(type_counts(train))}


def entity_types(data: Path) -> list[str]:
    """The setting's label set, as the data stage derived it from the gold sample."""
    return read_json(data / STAMP)["facts"]["types"]


def sentence_languages(data: Path, split: str) -> list[str]:
    """The language of every gold sentence of ``split`` (several in the multilingual setting)."""
    return read_json(data / "languages.json")[split]


# --- S1 / S7: train a tagger, then score it --------------------------------------------------

def train(c: DictConfig, out: Path, data: Path, train_file: Path) -> dict:
    """Train on ``train_file`` (dev from the data stage); fail when the tagger learned nothing."""
    seed_everything(c.seed)
    select_device(c.device)
    sentences, dev = read_conll(train_file), read_conll(data / "dev.conll")
    types = check_label_sets({"train": sentences, "dev": dev})
    model, training = train_tagger(c.ner, sentences, dev, types, out)
    tagger = load_tagger(model)
    dev_scores, dev_predicted = evaluate_on(tagger, dev, c.ner.eval_batch_size, None)
    check_learned(dev_scores["f1"], dev_predicted, c.ner, out)
    return {"train": len(sentences), "dev": len(dev), "dev_f1": dev_scores["f1"], "types": types,
            "training": training}


@stage(layout.S1, reads=("ner", "seed"))
def s1_stage(c: DictConfig, out: Path, data: Path) -> dict:
    return train(c, out, data, data / "train.conll")


@stage(layout.S7, reads=("ner", "seed"))
def s7_stage(c: DictConfig, out: Path, data: Path, augmented: Path) -> dict:
    return train(c, out, data, augmented / layout.GOLD_AUG)


def test_names(c: DictConfig) -> list[str]:
    own = get_spec(c.dataset).union or [c.dataset]
    return own + [d for d in c.test_datasets if d not in own]


def test_files(c: DictConfig) -> list[Path]:
    """The test files a run is scored on (hashed by content: an edited test set re-scores)."""
    base = resolve_data_dir(c.data_dir)
    files = []
    for name in test_names(c):
        files.append(get_spec(name).path(require_split(name, "test"), base))
    return files


def evaluate_on(tagger, sentences: list[TaggedSentence], batch_size: int, predictions_file: Path | None
                ) -> tuple[dict, list[list[str]]]:
    """Scores on ``sentences`` and the predicted tags (with a progress bar when the predictions are kept)."""
    predicted = predict_tags(tagger, sentences, batch_size, progress=predictions_file is not None)
    if predictions_file is not None:
        lines = "".join("".join(f"{w}\t{g}\t{p}\n" for w, g, p in zip(s.tokens, s.tags, tags)) + "\n"
                        for s, tags in zip(sentences, predicted))
        atomic_write_text(predictions_file, lines)
    return evaluate_tags([s.tags for s in sentences], predicted), predicted


def chain_record(stage_dirs: tuple[Path, ...]) -> tuple[dict, dict]:
    """The config every stage of the chain read (merged) and each stage's seconds, from their stamps."""
    config, timings = OmegaConf.create({}), {}
    for d in stage_dirs:
        stamp = read_json(Path(d) / STAMP)
        config = OmegaConf.merge(config, stamp["config"])
        timings[stamp["stage"]] = stamp["seconds"]
    return to_dict(config), timings


EVAL_READS = ("method", "profile", "dataset", "gold", "seed", "test_datasets", "ner.eval_batch_size")


def evaluate(c: DictConfig, out: Path, model_dir: Path, chain: tuple[Path, ...]) -> dict:
    """Score the tagger of ``model_dir`` on every test set; ``result.json`` records the whole chain."""
    select_device(c.device)
    tests = {name: load_split(name, "test", c.data_dir) for name in test_names(c)}
    tagger = load_tagger(model_dir / layout.MODEL)
    trained = read_json(model_dir / STAMP)["facts"]
    scores, predicted = {}, {}
    for name, sentences in tests.items():
        unseen = set().union(*(s.entity_types for s in sentences)) - set(trained["types"])
        if unseen:   # types the tagger never saw could never be predicted: the score would be silently wrong
            raise DataError(f"test set {name!r} has entity types {sorted(unseen)} that training did not "
                            f"({trained['types']})")
        scores[name], predicted[name] = evaluate_on(tagger, sentences, c.ner.eval_batch_size,
                                                    out / "predictions" / f"{name.replace('/', '_')}.conll")
    own = get_spec(c.dataset).union or [c.dataset]
    # a union dataset is scored on all its members' test sentences at once (micro)
    main = scores[c.dataset] if c.dataset in scores else evaluate_tags(
        [s.tags for k in own for s in tests[k]], [t for k in own for t in predicted[k]])
    config, timings = chain_record(chain)
    augmented = [d for d in chain if Path(d).name == layout.S6]
    result = {
        "method": c.method, "profile": c.profile, "dataset": c.dataset, "gold": c.gold, "seed": c.seed,
        "f1": main["f1"], "precision": main["precision"], "recall": main["recall"], "dev_f1": trained["dev_f1"],
        "training": trained["training"],
        "per_type": main["per_type"], "per_length": main["per_length"],
        "test": scores,
        "timings": timings,
        "sizes": {"train": trained["train"], "dev": trained["dev"], **{f"test:{k}": len(v) for k, v in tests.items()}},
        **({"augmentation": read_json(augmented[0] / layout.REPORT)} if augmented else {}),
        "config": config, "config_hash": config_hash(config),
        "versions": library_versions(),
    }
    write_json(out / layout.RESULT, result)
    return {"f1": main["f1"]}


@stage(layout.S1_EVAL, reads=EVAL_READS, files=test_files, loads=(layout.S1,))
def s1_eval_stage(c: DictConfig, out: Path, *chain: Path) -> dict:
    return evaluate(c, out, chain[-1], chain)


@stage(layout.S7_EVAL, reads=EVAL_READS, files=test_files, loads=(layout.S7,))
def s7_eval_stage(c: DictConfig, out: Path, *chain: Path) -> dict:
    return evaluate(c, out, chain[-1], chain)
