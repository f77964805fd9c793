"""The dataset registry: names such as ``multiconer/en`` mapped to local files.

Entries live in ``configs/datasets.yaml``.  Files are read from the data
directory (config ``data_dir``, default ``$ACLM_DATA_DIR``); an entry with
``hf`` coordinates falls back to the Hugging Face hub when its files are
absent, the only code path in the project that needs a network.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

import yaml

from aclm.data import DataError, TaggedSentence, normalise_tags, read_conll
from aclm.paths import CONFIG_DIR, PROJECT_ROOT

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    language: str
    train: Optional[str] = None
    dev: Optional[str] = None
    test: Optional[str] = None
    format: str = "auto"
    root: str = "data"                   # data | project
    samples: dict = field(default_factory=dict)
    hf: Optional[dict] = None
    union: list = field(default_factory=list)   # member datasets (the multilingual setting)
    empty_token: Optional[str] = None           # stand-in for empty tokens (else they are an error)

    def path(self, rel: str, data_dir: str | Path) -> Path:
        base = PROJECT_ROOT if self.root == "project" else Path(data_dir)
        return base / rel


@lru_cache(maxsize=None)
def registry(path: str | Path = CONFIG_DIR / "datasets.yaml") -> dict[str, DatasetSpec]:
    entries = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    specs = {}
    for name, entry in entries.items():
        try:
            specs[name] = DatasetSpec(name=name, **entry)
        except TypeError as err:
            raise DataError(f"{path}: dataset {name!r}: {err}") from None
    return specs


def get_spec(name: str) -> DatasetSpec:
    specs = registry()
    if name not in specs:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(specs))} "
                       f"(add it to {CONFIG_DIR / 'datasets.yaml'})")
    return specs[name]


def resolve_data_dir(data_dir: str | None) -> Path:
    return Path(data_dir or os.environ.get("ACLM_DATA_DIR") or PROJECT_ROOT / "data")


def load_split(name: str, split: str, data_dir: str | Path | None = None) -> list[TaggedSentence] | None:
    """Sentences of one split, or None when the entry has no such split."""
    spec = get_spec(name)
    rel = spec.samples.get(split) if isinstance(split, int) else getattr(spec, split)
    if rel is None:
        return None
    path = spec.path(rel, resolve_data_dir(str(data_dir) if data_dir else None))
    if path.exists():
        return read_conll(path, spec.format, spec.empty_token)
    if spec.hf and not isinstance(split, int):
        return load_from_hub(spec, split)
    raise FileNotFoundError(f"{path} not found for dataset {name!r} split {split!r}: "
                            f"set data_dir (or ACLM_DATA_DIR) to the folder that holds it")


def load_from_hub(spec: DatasetSpec, split: str) -> list[TaggedSentence]:
    """Load a split with ``datasets`` and map tag ids to names."""
    import datasets

    hf_split = (spec.hf.get("splits") or {}).get(split, {"dev": "validation"}.get(split, split))
    ds = datasets.load_dataset(spec.hf["path"], spec.hf.get("name"), split=hf_split)
    names = ds.features["ner_tags"].feature.names
    return [TaggedSentence(list(row["tokens"]), normalise_tags([names[i] for i in row["ner_tags"]]),
                           {"source": f"hf:{spec.hf['path']}:{hf_split}:{k}"})
            for k, row in enumerate(ds)]
