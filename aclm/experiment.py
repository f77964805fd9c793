"""One setting (dataset x gold size x seed): where its files live and the stages
every method shares — the gold data (S0), the gold NER model (S1) and the final
train-and-evaluate step (S7).

Layout, one directory per stage::

    runs/<profile>/<dataset>/gold<N>/seed<S>/
        data/          train.conll dev.conll (the gold sample)
        s1_ner/        best-model.pt result.json   <- also the Gold-only run
        <method>/      its own stages ..., then s7_ner/result.json
        <method>@<variant>/   the same for a sweep point (e.g. aclm@keywords.p-0.4)
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from omegaconf import DictConfig

from aclm import splits
from aclm.config import config_hash, to_dict
from aclm.data import TaggedSentence, check_label_sets, read_conll, type_counts, write_conll
from aclm.datasets import get_spec, load_split, resolve_data_dir
from aclm.io import atomic_write_text, read_json, write_json
from aclm.metrics import evaluate_tags
from aclm.ner import check_learned, load_tagger, predict_tags, train_tagger
from aclm.runtime import library_versions, seed_everything, select_device
from aclm.stages import STAMP, run_stage

log = logging.getLogger("aclm.experiment")


def run_root(cfg: DictConfig) -> Path:
    return Path(cfg.run_dir) / cfg.profile / cfg.dataset / f"gold{cfg.gold}" / f"seed{cfg.seed}"


def data_dir(cfg: DictConfig) -> Path:
    return run_root(cfg) / "data"


def s1_dir(cfg: DictConfig) -> Path:
    return run_root(cfg) / "s1_ner"


def method_dir(cfg: DictConfig) -> Path:
    """A method's stages; a sweep point (``variant``) gets its own, beside the method's."""
    return run_root(cfg) / (f"{cfg.method}@{cfg.variant}" if cfg.variant else cfg.method)


def member_config(cfg: DictConfig, member: str) -> DictConfig:
    sub = cfg.copy()
    sub.dataset = member
    return sub


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


def data_stage(cfg: DictConfig, force: bool = False) -> Path:
    out = data_dir(cfg)

    def build(tmp: Path) -> dict:
        train, dev = gold_data(cfg)
        types = check_label_sets({"train": train, "dev": dev})
        write_conll(tmp / "train.conll", train)
        write_conll(tmp / "dev.conll", dev)
        write_json(tmp / "languages.json", {"train": [s.meta["language"] for s in train],
                                             "dev": [s.meta["language"] for s in dev]})
        return {"train": len(train), "dev": len(dev), "types": types,
                "type_counts": dict(type_counts(train))}

    section = {"dataset": cfg.dataset, "gold": cfg.gold, "source": sample_source(cfg),
               "split_seed": cfg.splits.seed, "dev_size": cfg.splits.dev_size}
    run_stage("data", out, section, dataset_files(cfg), build, force=force)
    return out


def entity_types(cfg: DictConfig) -> list[str]:
    """The setting's label set, as the data stage derived it from the gold sample."""
    return read_json(data_dir(cfg) / STAMP)["facts"]["types"]


def sentence_languages(cfg: DictConfig, split: str) -> list[str]:
    """The language of every gold sentence of ``split`` (several in the multilingual setting)."""
    return read_json(data_dir(cfg) / "languages.json")[split]


# --- S1 / S7: train and evaluate a tagger --------------------------------------------------

def test_sets(cfg: DictConfig) -> dict[str, list[TaggedSentence]]:
    own = get_spec(cfg.dataset).union or [cfg.dataset]
    names = own + [d for d in cfg.test_datasets if d not in own]
    sets = {}
    for name in names:
        sentences = load_split(name, "test", cfg.data_dir)
        if sentences is None:
            raise ValueError(f"dataset {name!r} has no test split")
        sets[name] = sentences
    return sets


def evaluate_on(tagger, sentences: list[TaggedSentence], batch_size: int, predictions_file: Path | None
                ) -> tuple[dict, list[list[str]]]:
    """Scores on ``sentences`` and the predicted tags."""
    predicted = predict_tags(tagger, sentences, batch_size)
    if predictions_file is not None:
        lines = "".join("".join(f"{w}\t{g}\t{p}\n" for w, g, p in zip(s.tokens, s.tags, tags)) + "\n"
                        for s, tags in zip(sentences, predicted))
        atomic_write_text(predictions_file, lines)
    return evaluate_tags([s.tags for s in sentences], predicted), predicted


def stage_timings(*stage_dirs: Path) -> dict[str, float]:
    timings = {}
    for d in stage_dirs:
        stamp = Path(d) / STAMP
        if stamp.exists():
            info = read_json(stamp)
            timings[info["stage"]] = info["seconds"]
    return timings


def ner_stage(cfg: DictConfig, name: str, out: Path, train_file: Path, upstream: list[Path],
              extra: dict | None = None, force: bool = False) -> Path:
    """Train a tagger on ``train_file`` (dev from the data stage), evaluate it, write ``result.json``."""
    dev_file = data_dir(cfg) / "dev.conll"
    chain = [data_dir(cfg)]
    if name != "s1_ner":
        chain += [s1_dir(cfg), *sorted(p for p in method_dir(cfg).iterdir() if p.is_dir() and p != out)]

    def build(tmp: Path) -> dict:
        start = time.perf_counter()
        seed_everything(cfg.seed)
        select_device(cfg.device)
        train, dev = read_conll(train_file), read_conll(dev_file)
        tests = test_sets(cfg)
        types = check_label_sets({"train": train, "dev": dev, **{f"test:{k}": v for k, v in tests.items()}})
        model_path = train_tagger(cfg.ner, train, dev, types, tmp)
        tagger = load_tagger(model_path)
        dev_scores, dev_predicted = evaluate_on(tagger, dev, cfg.ner.eval_batch_size, None)
        check_learned(dev_scores["f1"], dev_predicted, cfg.ner, out)
        scores, predicted = {}, {}
        for k, v in tests.items():
            scores[k], predicted[k] = evaluate_on(tagger, v, cfg.ner.eval_batch_size,
                                                  tmp / "predictions" / f"{k.replace('/', '_')}.conll")
        own = get_spec(cfg.dataset).union or [cfg.dataset]
        # a union dataset is scored on all its members' test sentences at once (micro)
        main = scores[cfg.dataset] if cfg.dataset in scores else evaluate_tags(
            [s.tags for k in own for s in tests[k]], [t for k in own for t in predicted[k]])
        result = {
            "method": cfg.method if name == "s7_ner" else "gold_only",
            "profile": cfg.profile, "dataset": cfg.dataset, "gold": cfg.gold, "seed": cfg.seed,
            "f1": main["f1"], "precision": main["precision"], "recall": main["recall"], "dev_f1": dev_scores["f1"],
            "per_type": main["per_type"], "per_length": main["per_length"],
            "test": scores,
            "timings": {**stage_timings(*chain), name: round(time.perf_counter() - start, 3)},
            "sizes": {"train": len(train), "dev": len(dev), **{f"test:{k}": len(v) for k, v in tests.items()}},
            **(extra or {}),
            "config": to_dict(cfg), "config_hash": config_hash(cfg),
            "versions": library_versions(),
        }
        write_json(tmp / "result.json", result)
        return {"f1": main["f1"]}

    section = {"ner": cfg.ner, "seed": cfg.seed, "test": [cfg.dataset, *cfg.test_datasets]}
    run_stage(name, out, section, [train_file, dev_file, *upstream], build, force=force)
    return out


def s1_stage(cfg: DictConfig, force: bool = False) -> Path:
    data = data_stage(cfg)
    return ner_stage(cfg, "s1_ner", s1_dir(cfg), data / "train.conll", [data], force=force)


def augmented_dir(cfg: DictConfig) -> Path:
    """Where every augmentation method leaves gold+aug.conll (its S6 output)."""
    return method_dir(cfg) / "s6_postprocess"


def s7_stage(cfg: DictConfig, force: bool = False) -> Path:
    aug = augmented_dir(cfg)
    if not (aug / "gold+aug.conll").exists():
        raise FileNotFoundError(f"{aug / 'gold+aug.conll'} not found: run {cfg.method}'s stages first "
                                f"(make run METHOD={cfg.method} ...)")
    report = read_json(aug / "report.json")
    return ner_stage(cfg, "s7_ner", method_dir(cfg) / "s7_ner", aug / "gold+aug.conll", [data_dir(cfg), aug],
                     extra={"augmentation": report}, force=force)
