"""S0, the data stage: a setting's gold sample (train and dev), cut from its dataset's files.

:func:`dataset_files` lists the files (hashed as the stage's inputs); the data check reads the same list before
anything trains.  The test sets are the scoring stage's.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from aclm.base import splits
from aclm.base.dicts import to_dict
from aclm.base.data import DataError, TaggedSentence, check_label_sets, type_counts, write_conll
from aclm.base.datasets import DatasetSpec, get_spec, load_split, resolve_data_dir, run_spec
from aclm.base.io import write_json
from aclm.stages import layout
from aclm.stages.declare import stage

DATA_KEYS = ("dataset", "language", "gold", "splits.source", "splits.seed", "splits.dev_size")

log = logging.getLogger("aclm.stages.data")


def member_config(cfg: DictConfig, member: str) -> DictConfig:
    """The config of one member of a union dataset (the multilingual setting)."""
    return OmegaConf.create({**to_dict(cfg), "dataset": member})


def dataset_files(cfg: DictConfig) -> list[Path]:
    """The raw files a setting's gold data is cut from (the data stage's inputs)."""
    spec = get_spec(cfg.dataset)
    if spec.union:
        return [f for member in spec.union for f in dataset_files(member_config(cfg, member))]
    base = resolve_data_dir(cfg.data_dir)
    if sample_source(cfg) == "released":        # without a dev file, dev comes from the train set
        rels = [spec.samples[cfg.gold], spec.dev or spec.train]
    else:
        rels = [spec.train, spec.dev]
    return [spec.path(r, base) for r in rels if r]


#: What of a dataset's entry decides how its files are read, beyond their contents (hashed as inputs).
READ_AS = ("language", "format", "empty_token", "union")


def read_as(specs: list[DatasetSpec]) -> dict:
    """How each dataset of ``specs`` is read (its registry entry, or a folder's detected one): an edit of
    ``configs/datasets.yaml`` that changes it re-runs the stages reading it."""
    return {f"dataset {spec.name}": {key: getattr(spec, key) for key in READ_AS} for spec in specs}


def setting_datasets(c: DictConfig) -> dict:
    """How the setting's dataset (and a union's members) are read: what S0 depends on beyond its files."""
    spec = run_spec(c)
    return read_as([spec, *map(get_spec, spec.union)])


def sample_source(cfg: DictConfig) -> str:
    """``released``, ``stratified`` or ``full``: where the gold sample comes from.  ``auto`` takes the authors'
    released sample where one of this size ships (one fixed sample: seeds vary training only, as in the paper)."""
    if cfg.gold == "full":
        return "full"
    shipped = cfg.gold in get_spec(cfg.dataset).samples
    if cfg.splits.source == "released" and not shipped:
        raise DataError(f"splits.source=released: {cfg.dataset} ships no released sample of gold={cfg.gold} "
                        f"(it ships {sorted(get_spec(cfg.dataset).samples) or 'none'}); use splits.source=stratified")
    if cfg.splits.source == "auto":
        return "released" if shipped else "stratified"
    return cfg.splits.source


# --- S0: the gold sample -----------------------------------------------------------------

def data_splits(cfg: DictConfig) -> tuple[list[TaggedSentence], list[TaggedSentence]]:
    """Train and dev sentences of this setting, each with its language in ``meta``; a union joins its members'."""
    spec = run_spec(cfg)
    if spec.union:
        parts = [data_splits(member_config(cfg, member)) for member in spec.union]
        return [s for train, _ in parts for s in train], [s for _, dev in parts for s in dev]
    train, dev = _single_data_splits(cfg, spec)
    for s in train + dev:
        s.meta["language"] = spec.language
    return train, dev


def _single_data_splits(cfg: DictConfig, spec) -> tuple[list[TaggedSentence], list[TaggedSentence]]:
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
    size = wanted_dev_size(cfg, len(train))
    if dev is None:  # carve a dev set out of what the gold sample left
        dev = splits.sample(full, size or len(full) // 10, seed, exclude=used)
        log.warning("%s has no dev file: %d of the %d sentences of %s are taken as its dev set", cfg.dataset,
                    len(dev), len(full), spec.path(spec.train, resolve_data_dir(cfg.data_dir)))
        if cfg.gold == "full":
            dev_ids = {id(s) for s in dev}
            train = [s for s in full if id(s) not in dev_ids]
    elif size and size < len(dev):
        dev = splits.sample(dev, size, seed)
    return train, dev


def wanted_dev_size(cfg: DictConfig, sample: int) -> int | None:
    """``splits.dev_size`` in sentences (``gold``: ``sample``, the gold sample's size), or None: the whole dev
    set, or for a dataset without one, a tenth of its train set."""
    size = cfg.splits.dev_size
    if size == "gold":
        return sample if cfg.gold != "full" else None
    return size


def asked_size(cfg: DictConfig) -> int | None:
    """The gold sentences a setting asks for (``gold`` per member of a union), None for ``full``."""
    return cfg.gold * len(get_spec(cfg.dataset).union or [cfg.dataset]) if isinstance(cfg.gold, int) else None


@stage(layout.DATA, keys=DATA_KEYS, files=dataset_files, reads=setting_datasets)
def data_stage(c: DictConfig, out: Path) -> dict:
    train, dev = data_splits(c)
    if asked_size(c) not in (None, len(train)):
        log.info("gold=%s holds %d sentences: a stratified sample has about N, not exactly N (98 for 100 on "
                 "MultiCoNER en, as in the paper); the folder keeps the N asked for, result.json the count "
                 "(sizes.gold)", c.gold, len(train))
    types = check_label_sets({"train": train, "dev": dev})
    write_conll(out / layout.gold_file("train"), train)
    write_conll(out / layout.gold_file("dev"), dev)
    write_json(out / layout.LANGUAGES, {"train": [s.meta["language"] for s in train],
                                         "dev": [s.meta["language"] for s in dev]})
    return {"train": len(train), "dev": len(dev), "types": types, "source": sample_source(c),
            "type_counts": dict(type_counts(train))}
