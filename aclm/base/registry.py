"""The method table: the one place that says what a method is.

An entry says how it generates (``none``: no generation, a tagger on gold only or GLiNER zero-shot;
``aclm``: stages S2-S5; ``augment``: one stage running ``augment(cfg, gold) -> (rows, counts)``), the
config keys that stage reads (only they reach it and are fingerprinted) and the methods it needs first. Adding a method:
docs/configuration.md, "Datasets and methods of your own".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from aclm.base.paths import CONFIG_DIR

GENERATIONS = ("none", "aclm", "augment")
TAGGERS = ("flair", "gliner", "gliner_zero_shot")


@dataclass(frozen=True)
class Method:
    name: str
    summary: str
    generation: str                     # none | aclm | augment
    keys: tuple[str, ...] = ()          # config keys an augment stage reads (besides seed)
    augment: str = ""                   # "module:function" for generation="augment"
    needs: tuple[str, ...] = ()         # methods of the same setting that must run first
    files: str = ""                     # "module:function" naming raw files it reads (hashed by content)
    config_file: Optional[Path] = None  # its YAML (default configs/methods/<name>.yaml)
    generator: str = ""                 # the config section naming its pretrained generator (``model``)
    decoding: str = ""                  # the config section of its sampler's settings (``constrained``)
    title: str = ""                     # its name in tables (default: name)
    generation_cost: float = 1.0        # share of ACLM's S4+S5 cost, assumed (tools/stage_costs.py)
    tagger: str = "flair"               # flair (S1/S7), gliner (S7 fine-tunes GLiNER), gliner_zero_shot (no S7)

    def __post_init__(self) -> None:
        if self.generation not in GENERATIONS:
            raise ValueError(f"method {self.name!r}: generation must be one of {GENERATIONS}")
        if self.tagger not in TAGGERS:
            raise ValueError(f"method {self.name!r}: tagger must be one of {TAGGERS}")
        if (self.generation == "augment") != bool(self.augment):
            raise ValueError(f"method {self.name!r}: an augment function goes with generation='augment' only")
        if not self.title:
            object.__setattr__(self, "title", self.name)

    @property
    def yaml(self) -> Path:
        return self.config_file or CONFIG_DIR / "methods" / f"{self.name}.yaml"

    @property
    def phase(self) -> int:
        """0: S1 (Gold-only); 1: methods that need only S1; one more per method needed first."""
        if self.name == "gold_only":
            return 0
        return 1 + max((get(n).phase for n in self.needs), default=0)

    def augmenter(self) -> Callable:
        return _load(self.augment)

    def input_files(self) -> Optional[Callable]:
        return _load(self.files) if self.files else None

    def code_modules(self) -> tuple[str, ...]:
        """Modules the entry names: code reached by name, which the stage's fingerprint must cover."""
        return tuple(target.partition(":")[0] for target in (self.augment, self.files) if target)


def _load(target: str) -> Callable:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add a method; a name already there is an error."""
    if method.name in METHODS:
        raise ValueError(f"method {method.name!r} is registered already ({METHODS[method.name].summary})")
    METHODS[method.name] = method
    return method


def get(name: str) -> Method:
    if name not in METHODS:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name]


# In table order. generation_cost: LwTR, DAGA ~0; MulDA = the same mBART-50; MELM: xlm-roberta-base is
# ~0.45 of mbart-large-50's parameters; LLM: a 7B model sampling without fine-tuning, half (a guess).
for _method in (
    Method("gold_only", "S1 tagger on the gold sample", "none", title="Gold-only"),
    Method("gold_only_tuned", "Gold-only with S7's learning rate chosen on dev and a long patience (tuning.*)",
           "none", title="Gold-only (tuned)"),
    Method("gliner_zero_shot", "GLiNER as pretrained, prompted with the dataset's type names (no training)", "none",
           tagger="gliner_zero_shot", title="GLiNER zero-shot"),
    Method("gliner_finetuned", "GLiNER fine-tuned on the gold sample, the epoch best on dev kept (gliner.*)", "none",
           tagger="gliner", title="GLiNER fine-tuned"),
    Method("lwtr", "label-wise token replacement", "augment", ("lwtr", "generation.rounds"),
           "baselines.lwtr:augment_gold", title="LwTR", generation_cost=0.0),
    Method("daga", "LSTM language model over tag-before-token sentences", "augment",
           ("daga", "generation.rounds"), "baselines.daga:augment_gold", decoding="daga", title="DAGA",
           generation_cost=0.0),
    Method("mulda", "mBART-50 as the language model of DAGA's linearization", "augment", ("mulda",),
           "baselines.mulda:augment", generator="mulda", decoding="mulda", title="MulDA"),
    Method("llm", "an instruction-tuned LLM prompted with a few gold sentences writes new ones (llm.*)", "augment",
           ("llm",), "baselines.llm:augment", title="LLM", generation_cost=0.5),
    Method("melm", "masked entity language modelling (XLM-R), consistency filter", "augment",
           ("melm", "generator.label_token_init", "generation.mixner.embedder", "generation.mixner.batch_size"),
           "melm.augment:augment", files="melm.sources:code_mix_files", title="MELM", generation_cost=0.45),
    Method("wikineural", "gold + as many WikiNEuRal silver sentences as ACLM added", "augment",
           ("generation.rounds",), "baselines.wikineural:augment", needs=("aclm",),
           files="baselines.wikineural:silver_files", title="WikiNEuRal", generation_cost=0.0),
    Method("gold_only_budget", "Gold-only trained as long as ACLM: gold + as many gold copies as ACLM added",
           "augment", (), "baselines.budget:augment", needs=("aclm",), title="Gold-only (ACLM's budget)",
           generation_cost=0.0),
    Method("aclm_only_entity", "ACLM with no keywords: templates keep the entities only", "aclm",
           generator="generator", decoding="generation", title="ACLM only entity"),
    Method("aclm_random", "ACLM with random keywords (a matched control)", "aclm",
           generator="generator", decoding="generation", title="ACLM random"),
    Method("aclm", "attention keywords, selective masking, mBART-50, mixner", "aclm",
           generator="generator", decoding="generation", title="ACLM"),
):
    register(_method)
