"""Where a run's files live: the one description of the run directory.

    <run_dir>/<profile>/<dataset>[+data-<hash>]/gold<N>/seed<S>[@<setting_variant>]/
        data/                  train.conll dev.conll languages.json   (S0, the gold sample)
        s1_ner/                best-model.pt                          (S1, the gold tagger)
        s1_eval/               result.json predictions/               (Gold-only's scores)
        <method>[@<variant>]/  its own stages (ACLM's s2_keywords ... s5_generation, or augment), then
            s6_postprocess/    aug.conll gold+aug.conll report.json
            s7_ner/            best-model.pt
            s7_eval/           result.json predictions/

A variant shares the setting's gold data and S1; :mod:`aclm.run.naming` names variants after a run's overrides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Union

from aclm.base.datasets import data_variant, run_name

DATA = "data"
S1, S1_EVAL = "s1_ner", "s1_eval"
S2, S3, S4, S5 = "s2_keywords", "s3_templates", "s4_generator", "s5_generation"
AUGMENT = "augment"
S6 = "s6_postprocess"
S7, S7_EVAL = "s7_ner", "s7_eval"

SPLITS = ("train", "dev")               # the gold data's splits, and of S2's and S3's rows
LANGUAGES = "languages.json"
RESULT, PREDICTIONS = "result.json", "predictions"
FAILED = "failed.json"
LOG = "run.log"
MODEL = "best-model.pt"
AUG, GOLD_AUG, REPORT = "aug.conll", "gold+aug.conll", "report.json"
GENERATIONS = "generations.jsonl"
GOLD_ONLY = "gold_only"
#: The stages every method of a setting shares: built under the setting's lock.
SHARED = (DATA, S1, S1_EVAL)


def gold_file(split: str) -> str:
    """The data stage's file of one split (``train.conll``)."""
    return f"{split}.conll"


def rows_file(split: str) -> str:
    """S2's and S3's rows of one split (``train.jsonl``)."""
    return f"{split}.jsonl"


@dataclass(frozen=True)
class RunLayout:
    """The directories of one run: a method on one setting (dataset, gold size, seed) of a profile."""

    run_dir: str
    profile: str
    dataset: str
    gold: Union[int, str]
    seed: int
    method: str = GOLD_ONLY
    variant: str = ""
    setting_variant: str = ""

    @classmethod
    def of(cls, cfg) -> "RunLayout":
        """The layout of a resolved config (anything with these attributes)."""
        return cls(str(cfg.run_dir), cfg.profile, dataset_dir_name(cfg.dataset, cfg.data_dir), cfg.gold, cfg.seed,
                   cfg.method, cfg.variant, getattr(cfg, "setting_variant", ""))

    @property
    def root(self) -> Path:
        seed = f"seed{self.seed}" + (f"@{self.setting_variant}" if self.setting_variant else "")
        return Path(self.run_dir) / self.profile / self.dataset / f"gold{self.gold}" / seed

    @property
    def data(self) -> Path:
        return self.root / DATA

    @property
    def s1(self) -> Path:
        return self.root / S1

    @property
    def method_dir(self) -> Path:
        name = f"{self.method}@{self.variant}" if self.variant else self.method
        return self.root / name

    def stage(self, name: str) -> Path:
        """A setting-level stage (data, S1 and its evaluation) or one of the method's own."""
        return self.root / name if name in (DATA, S1, S1_EVAL) else self.method_dir / name

    @property
    def result_path(self) -> Path:
        return self.stage(S1_EVAL if self.method == GOLD_ONLY else S7_EVAL) / RESULT

    @property
    def log_path(self) -> Path:
        """The run's log: beside its result, in the method folder (a Gold-only run's in the setting folder)."""
        return (self.root if self.method == GOLD_ONLY else self.method_dir) / LOG

    @property
    def failed_path(self) -> Path:
        return self.result_path.parent / FAILED

    @property
    def aug_path(self) -> Path:
        return self.stage(S6) / AUG

    def of_method(self, method: str) -> "RunLayout":
        """The same setting's run of another method (its plain run, no variant)."""
        return replace(self, method=method, variant="")


def dataset_dir_name(dataset: str, data_dir=None) -> str:
    """A dataset's directory in the run tree: its registry name (``+data-<hash>`` for a copy whose files differ
    from the published ones), or ``local/<folder>-<hash>`` for a folder."""
    variant = data_variant(dataset, data_dir)
    return run_name(dataset) + (f"+{variant}" if variant else "")
