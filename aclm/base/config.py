"""Typed, composable run configuration: the schema of the YAML profiles (docs/configuration.md).

Every key's meaning, choices and bound are declared once here (:func:`key`), for ``--help`` and the
checks. Unknown keys, wrong types and out-of-bound values fail on load, naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

import yaml
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from aclm.base.datasets import dataset_error, language_error
from aclm.base.layers import layer_span
from aclm.base.models import model_path  # noqa: F401  tools/warm_start.py imports it from here (in its fingerprint)
from aclm.base.paths import CONFIG_DIR, PROJECT_ROOT
from aclm.base.registry import METHODS


#: A key's bound: (allowed?, why not and what to give instead), failing as ``<key>=<value>: <why>``; it rules
#: out values that would do nothing, silently run another method, or fail mid-run.
Check = tuple[Callable[[Any], bool], str]


def key(meaning: str, *, choices: tuple = (), default: Any = MISSING, factory: Optional[Callable] = None,
        check: Optional[Check] = None) -> Any:
    """A config key with its meaning, choices and bound: the one place ``--help`` and the checks read."""
    metadata = {"help": meaning, "choices": choices, "check": check}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def section(kind: type, meaning: str = "") -> Any:
    return field(default_factory=kind, metadata={"help": meaning, "choices": (), "check": None})


def at_least_1(value: Any) -> bool:
    return value >= 1


def flair_layers(spec: str) -> bool:
    """Whether flair can read ``ner.layers``: ``all`` or comma-joined ints."""
    try:
        return spec == "all" or bool([int(part) for part in spec.split(",")])
    except ValueError:
        return False


# Bounds several keys share.
ROUNDS: Check = (at_least_1, "fewer than 1 round generates nothing: the method would be Gold-only under another "
                             "name; give 1 or more")
EPOCHS: Check = (at_least_1, "a model trained for no epoch stays as it was loaded; give 1 or more")
LEARNING_RATE: Check = (lambda v: v > 0, "a learning rate of 0 leaves the weights as they are (a negative one "
                                         "climbs the loss); give a positive rate")
BATCH: Check = (at_least_1, "a batch holds 1 sentence or more")
CANDIDATES: Check = (at_least_1, "decoding keeps 1 candidate or more; give 1 or more")
SIZE: Check = (at_least_1, "nothing fits in a size below 1; give 1 or more")
DROPOUT: Check = (lambda v: 0 <= v < 1, "a dropout of 1 zeroes every unit; give a rate in [0, 1)")
WEIGHT_DECAY: Check = (lambda v: v >= 0, "a negative weight decay pushes the weights away from 0; give 0 or more")
SEED: Check = (lambda v: 0 <= v < 2**32, "numpy's generators take a seed from 0 to 2**32 - 1 (4294967295); give "
                                        "one there")

ON_OFF = ("off", "labels", "entities")
PRECISIONS = ("auto", "no", "bf16", "fp16")


@dataclass
class NERConfig:
    model: str = key("the S1/S7 encoder: a hub id, a local folder or pkg:<package>/<folder>")
    tagger: str = key("linear: a linear head (ACLM); bilstm_crf: WikiNEuRal's BiLSTM-CRF",
                      choices=("linear", "bilstm_crf"))
    layers: str = key('flair layer spec of the encoder layers fed to the head: "-1" or "-1,-2,-3,-4"',
                      check=(flair_layers, "give all, or layer indices joined by commas such as -1 or -1,-2,-3,-4 "
                                           "(flair's form)"))
    layer_mean: bool = key("average the chosen layers (else concatenate them)")
    subtoken_pooling: str = key("how a word's sub-tokens make its vector",
                                choices=("first", "last", "first_last", "mean"))
    fine_tune: bool = key("train the encoder's weights with the head (else the encoder is frozen)")
    optimizer: str = key("the tagger's optimizer", choices=("adam", "adamw", "sgd"))
    lr: float = key("learning rate of the tagger (S1, S7)", check=LEARNING_RATE)
    batch_size: int = key("training sentences per step", check=BATCH)
    epochs: int = key("training epochs at most (annealing or early stopping may end sooner)", check=EPOCHS)
    schedule: str = key("anneal: flair's default (released code), halve the lr on a flat dev score; linear: "
                        "warm-up then decay; constant", choices=("anneal", "linear", "constant"))
    anneal_patience: int = key("anneal: epochs without dev gain before the lr is halved",
                               check=(lambda v: v >= 0,
                                      "a negative patience halves the rate after every epoch; give 0 or more"))
    min_lr: float = key("anneal: training stops once the lr falls below this")
    warmup_fraction: float = key("linear: share of the training steps spent warming up",
                                 check=(lambda v: 0 <= v <= 1,
                                        "is a share of the training steps; give a value in [0, 1]"))
    early_stopping: Optional[int] = key("stop after this many epochs without dev gain (null: never)", default=None,
                                        check=(lambda v: v is None or v >= 1, "0 would read as never, as null "
                                               "does; give 1 or more epochs without dev gain, or null"))
    reproject_embeddings: bool = key("flair's trained linear map before the output layer")
    on_no_learning: str = key("a tagger with dev F1 0 or only O predictions: fail its run, or warn",
                              choices=("fail", "warn"))
    hidden_size: int = key("bilstm_crf: the BiLSTM's hidden units a direction")
    rnn_layers: int = key("bilstm_crf: stacked BiLSTM layers")
    dropout: float = key("bilstm_crf: dropout rate", check=DROPOUT)
    eval_batch_size: int = key("sentences per batch when tagging dev and test sets", check=BATCH)
    use_amp: Union[bool, str] = key("flair's mixed-precision training (auto: on CUDA only)",
                                    choices=("auto", True, False))


@dataclass
class TuningConfig:
    learning_rates: list = key("S7 trains a tagger at each rate and keeps the best on dev (gold_only_tuned; empty: "
                               "ner.lr alone, as every other method)", factory=list,
                               check=(lambda v: all(lr > 0 for lr in v), LEARNING_RATE[1]))
    anneal_patience: Optional[int] = key("S7's ner.anneal_patience while tuning (null: ner's own)", default=None,
                                         check=(lambda v: v is None or v >= 0, "give 0 or more, or null"))


@dataclass
class GlinerConfig:
    model: str = key("the span tagger of gliner_*: a pretrained GLiNER (hub id or folder), or encoder:<encoder> "
                     "for one with no span pretraining over that encoder")
    labels: dict = key("entity type -> the name GLiNER is prompted with (a type not listed: lower-cased)",
                       factory=dict)
    threshold: float = key("a span scored above this is an entity", check=(lambda v: 0 < v < 1, "give a "
                           "probability in (0, 1): at 0 every span is an entity, at 1 none"))
    batch_size: int = key("sentences a batch, in fine-tuning and in tagging", check=BATCH)
    epochs: int = key("gliner_finetuned: fine-tuning epochs (the one with the best dev F1 is kept)", check=EPOCHS)
    lr: float = key("gliner_finetuned: learning rate", check=LEARNING_RATE)
    others_lr: Optional[float] = key("gliner_finetuned: the span layers' learning rate (null: gliner.lr); a GLiNER "
                                     "built over an encoder (encoder:) starts them at random", default=None,
                                     check=(lambda v: v is None or v > 0, "give a rate above 0, or null"))


@dataclass
class KeywordConfig:
    selection: str = key("how S2 picks keywords: attention (ACLM), random (ACLM random, matched count), "
                         "random_released (the released random draw), none (ACLM only entity)",
                         choices=("attention", "random", "random_released", "none"))
    rule: str = key("candidate words: paper (no punctuation, no stop words) or released (the released code's "
                    "ASCII-punctuation rule; other entities compete; p = 0 keeps all)", choices=("paper", "released"))
    layers: str = key('attention layers averaged: last1, last4, all, or a 0-based inclusive range such as "8-11"')
    p: float = key("keyword rate: k = ceil(p x non-entity words) keywords a sentence (0: none)",
                   check=(lambda v: 0 <= v <= 1, "must lie in [0, 1]"))
    stopwords: str = key("stop-word list: the sentence's language's, the ten languages' union, or none",
                         choices=("stopwordsiso", "stopwordsiso_all", "none"))
    batch_size: int = key("sentences per attention batch", check=BATCH)
    max_subtokens: int = key("sentences longer than this (encoder sub-tokens) get no keywords (counted)",
                             check=(at_least_1, "every sentence would be too long to get keywords (ACLM only entity "
                                    "under another name); give 1 or more"))
    split_commas: bool = key("S2-S5 see tokens split at commas (the released S2 reader)")


@dataclass
class GeneratorConfig:
    model: str = key("the S4 generator to fine-tune: an mBART-50 hub id or local folder, or any seq2seq folder "
                     "(mini_warm: a BERT2BERT without language codes, make warm-generator)")
    lr: float = key("fine-tuning learning rate", check=LEARNING_RATE)
    batch_size: int = key("templates per fine-tuning step", check=BATCH)
    epochs: int = key("fine-tuning epochs", check=EPOCHS)
    weight_decay: float = key("AdamW weight decay", check=WEIGHT_DECAY)
    max_length: int = key("tokens in and out during fine-tuning", check=SIZE)
    mixed_precision: str = key("fine-tuning precision (auto: bf16 on a capable GPU, fp16 on another, none on CPU)",
                               choices=PRECISIONS)
    label_token_init: dict = key("entity type -> the words its new label tokens' embeddings start from",
                                 factory=dict)
    label_init: str = key("the label tokens' first embeddings: the mean of label_token_init's words (words), or "
                          "the released script's draw on its fixed ids (released: MultiCoNER, mBART-50)",
                          choices=("words", "released"), default="words")


@dataclass
class MixnerConfig:
    mode: str = key("paper: a Gaussian gate mixes a template with a neighbour's when gamma > beta; code: the "
                    "released schedule (plain rounds, then mixed ones); off", choices=("paper", "code", "off"))
    beta: float = key("paper: mix when gamma > beta")
    gamma_sigma: float = key("paper: standard deviation of gamma ~ N(0.5, sigma) (not stated in the paper)")
    code_mixed_rounds: int = key("code: the last rounds mix, with the nearest neighbours farther first (2nd, 1st)")
    retrieval_k: int = key("nearest neighbours (Sentence-BERT) a mixing partner is drawn from",
                           check=(at_least_1, "mixner's partner is one of the k nearest sentences, so 0 leaves none; "
                                  "give 1 or more, or generation.mixner.mode=off"))
    embedder: str = key("the Sentence-BERT model: a hub id or local folder")
    batch_size: int = key("sentences per embedding batch", check=BATCH)


@dataclass
class GenerationConfig:
    rounds: int = key("R: generations per training sentence", check=ROUNDS)
    top_k: int = key("sampling keeps the k most likely tokens", check=CANDIDATES)
    num_beams: int = key("beams in decoding", check=CANDIDATES)
    max_length: int = key("tokens generated at most", check=SIZE)
    at_limit: str = key("a generation that reached max_length: drop it as malformed_truncated, or keep it as the "
                        "released script does (counted either way)", choices=("drop", "keep"), default="keep")
    batch_size: int = key("templates per decoding batch", check=BATCH)
    parse: str = key("how a generation is read back: strict (each label token closed by the same one) or "
                     "released (the released code's reading)", choices=("strict", "released"))
    dedupe: str = key("a repeat is the same words and tags (parsed), the same generated text (raw), or nothing is "
                      "a repeat (off: the released shell scripts' --remove_repetitions False)",
                      choices=("parsed", "raw", "off"))
    constrained: str = key("decoding keeps the label-token grammar (labels), and the template's entities "
                           "(entities); off: free decoding, as the paper", choices=ON_OFF)
    force_first_token: bool = key("decoding starts with the token every training target started with (the language "
                                  "code); false: the generator writes it itself, as the released dynamic mode")
    mixner: MixnerConfig = section(MixnerConfig, "mixner: templates mixed with a retrieved neighbour's (S5)")


@dataclass
class PostprocessConfig:
    consistency_filter: bool = key("keep only augmentations the S1 tagger tags identically")
    drop_copies: bool = key("drop copies (and near copies) of the source sentence; released code: no")
    max_similarity: float = key("drop if the token overlap with the source is above this (1.0: exact copies only)",
                                check=(lambda v: v > 0, "every augmentation is at least 0-similar to its source, so "
                                       "all would be dropped; give a value above 0 (1: exact copies only), or "
                                       "postprocess.drop_copies=false"))
    drop_entity_free: bool = key("drop augmentations that hold no entity")
    on_nothing_added: str = key("S6 kept nothing, so S7 would be Gold-only's tagger: fail the run, or warn and "
                                "flag its result", choices=("fail", "warn"))


@dataclass
class LwTRConfig:
    p: float = key("chance that a token is replaced by a training token of the same label",
                   check=(lambda v: 0 < v <= 1, "is LwTR's chance to replace a token: at 0 it copies the gold "
                          "sentences; give a rate in (0, 1]"))
    variant: str = key("paper: as published; released: the rule the released LwTR files show; replay: that rule "
                       "drawn as they were, word for word (baselines/lwtr.py)", choices=("paper", "released", "replay"))
    replay_seed: int = key("replay: the seed of numpy's legacy generator (26: the released files', Dai & Adel's "
                           "--seed 52 halved); the other variants draw from the run's seed", default=26, check=SEED)


@dataclass
class DAGAConfig:
    embedding_dim: int = key("the LSTM language model's embedding size", check=SIZE)
    hidden_size: int = key("the LSTM's hidden units", check=SIZE)
    dropout: float = key("dropout rate", check=DROPOUT)
    lr: float = key("learning rate", check=LEARNING_RATE)
    epochs: int = key("training epochs (the epoch with the lowest dev loss is kept)", check=EPOCHS)
    batch_size: int = key("sentences per step", check=BATCH)
    max_length: int = key("tokens of a linearized sentence sampled at most", check=SIZE)
    constrained: str = key("sampling keeps a tag before a word (labels = entities); off: free sampling",
                           choices=ON_OFF, default="off")


@dataclass
class MulDAConfig:
    model: str = key("the language model fine-tuned: an mBART-50 hub id or local folder")
    lr: float = key("fine-tuning learning rate", check=LEARNING_RATE)
    batch_size: int = key("sentences per fine-tuning step", check=BATCH)
    epochs: int = key("fine-tuning epochs (the epoch with the lowest dev loss is kept)", check=EPOCHS)
    weight_decay: float = key("AdamW weight decay", check=WEIGHT_DECAY)
    mixed_precision: str = key("fine-tuning precision (as generator.mixed_precision)", choices=PRECISIONS)
    label_token_init: dict = key("entity type -> the words its tag tokens' embeddings start from", factory=dict)
    max_length: int = key("tokens of a linearized sentence, in fine-tuning and in sampling", check=SIZE)
    rounds: int = key("R: samples per gold sentence", check=ROUNDS)
    top_k: int = key("sampling keeps the k most likely tokens", check=CANDIDATES)
    generation_batch_size: int = key("encoder inputs per generate call", check=BATCH)
    constrained: str = key("sampling keeps a tag before a word (labels = entities); off: free sampling",
                           choices=ON_OFF, default="off")


@dataclass
class LLMConfig:
    model: str = key("the instruction-tuned causal LM prompted (not trained): a hub id or local folder")
    type_names: dict = key("entity type -> its name in the prompt (a type not listed: lower-cased)", factory=dict)
    prompt: str = key("what the model is asked, with {language}, {types} (PER (person), ...) and {examples} (the "
                      "shown gold sentences, linearized, one a line)", check=(
                          lambda v: "{examples}" in v, "a prompt that shows no {examples} asks for nothing to copy"))
    shots: int = key("gold sentences a prompt shows", check=(at_least_1, "a prompt shows 1 gold sentence or more"))
    rounds: int = key("R: prompts per gold sentence (one response each)", check=ROUNDS)
    top_k: int = key("sampling keeps the k most likely tokens the grammar allows", check=CANDIDATES)
    temperature: float = key("sampling temperature", check=(lambda v: v > 0, "give a temperature above 0"))
    max_new_tokens: int = key("tokens of a response (one cut there is dropped as truncated)", check=SIZE)
    batch_size: int = key("prompts per generate call", check=BATCH)


@dataclass
class MELMConfig:
    model: str = key("the masked language model fine-tuned: an XLM-R hub id or local folder")
    mask_rate: float = key("eta: share of entity tokens masked in training",
                           check=(lambda v: 0 < v <= 1, "is the share of entity tokens MELM masks in training: with "
                                  "none it learns nothing; give a rate in (0, 1]"))
    epochs: int = key("fine-tuning epochs", check=EPOCHS)
    lr: float = key("fine-tuning learning rate", check=LEARNING_RATE)
    batch_size: int = key("sentences per step", check=BATCH)
    top_k: int = key("a masked entity token is filled from the k most likely tokens", check=CANDIDATES)
    rounds: int = key("R: augmentations per gold sentence", check=ROUNDS)
    code_mix: bool = key("replace entities with same-type entities of other languages (MELM's code-mixing)")
    code_mix_languages: list = key("datasets whose entities code-mixing borrows (empty: a union's own languages)",
                                   factory=list)


@dataclass
class AnalysisConfig:
    perplexity_model: str = key("the causal language model Table 3's perplexity is measured with (GPT-2)")
    batch_size: int = key("sentences per perplexity batch", check=BATCH)


@dataclass
class StorageConfig:
    keep_models: bool = key("keep S4 generators and S7 taggers once their outputs are written")
    keep_final_tagger: bool = key("keep the S7 tagger (a single run's product); the grids turn it off")


@dataclass
class DataCheckConfig:
    min_type_sentences: int = key("a type in fewer sentences of a setting's files is an error (a typo?)")
    canonical_tags: bool = key("a lower-case tag (b-per) is an error; false: read it as upper-case")


@dataclass
class SplitConfig:
    source: str = key("where the gold sample comes from: auto (the released sample where shipped, else "
                      "stratified), released, stratified", choices=("auto", "released", "stratified"))
    seed: int = key("the stratified draw's seed (the run's seed varies training only)", check=SEED)
    sizes: list = key("gold sizes scripts/make_splits.py cuts", factory=list,
                      check=(lambda v: all(isinstance(n, int) and n >= 1 for n in v),
                             "each sample holds 1 sentence or more"))
    dev_size: Optional[Union[int, str]] = key('dev sentences: a number, "gold" (as many as the gold sample) or '
                                              "null (the full dev set)", default=None,
                                              check=(lambda v: v in (None, "gold") or v >= 1,
                                                     "0 would read as the full dev set; give 1 or more, 'gold', or "
                                                     "null (the full dev set)"))


@dataclass
class Config:
    profile: str = key("configs/profiles/<profile>.yaml: the values everything else starts from")
    method: str = key("the method run (scripts/run_method.py --list)")
    variant: str = key("names a method's sweep point: runs in <method>@<variant>/, sharing S0-S1")
    setting_variant: str = key("names a setting with its own S0-S1: runs in seed<S>@<setting_variant>/", default="")
    dataset: str = key("a key of configs/datasets.yaml, or a folder with train.conll (dev, test)")
    language: Optional[str] = key("a dataset folder's ISO 639-1 language (null: detected from its text)", default=None)
    test_datasets: list = key("extra test sets a run is scored on (cross-lingual)", factory=list)
    gold: Union[int, str] = key('gold sentences sampled from the train set, or "full"',
                                check=(lambda v: v == "full" or v >= 1,
                                       "a sample holds 1 sentence or more; give 1 or more, or 'full'"))
    seed: int = key("the training seed (S1-S7); the gold sample's is splits.seed", check=SEED)
    data_dir: str = key("where the datasets are (default: $ACLM_DATA_DIR, else ./data)")
    run_dir: str = key("where runs are written")
    device: str = key("where models run (auto: CUDA when there is one)", choices=("auto", "cpu", "cuda"))
    tensorboard: str = key("TensorBoard event files of every model a stage trains, in <stage>/tensorboard/ "
                           "(auto: where the tensorboard package is installed)", choices=("auto", "on", "off"),
                           default="auto")

    splits: SplitConfig = section(SplitConfig, "S0: how the gold sample and the dev set are drawn")
    data_check: DataCheckConfig = section(DataCheckConfig, "the check of every file before any training")
    ner: NERConfig = section(NERConfig, "the NER tagger: S1 on gold, S7 on gold + augmentations")
    tuning: TuningConfig = section(TuningConfig, "S7's learning rate chosen on dev, and its patience")
    gliner: GlinerConfig = section(GlinerConfig, "GLiNER, the span tagger of gliner_zero_shot and gliner_finetuned")
    keywords: KeywordConfig = section(KeywordConfig, "S2: keywords from the S1 tagger's attention")
    generator: GeneratorConfig = section(GeneratorConfig, "S4: the generator fine-tuned on S3's templates")
    generation: GenerationConfig = section(GenerationConfig, "S5: generation from dynamic masks, with mixner")
    postprocess: PostprocessConfig = section(PostprocessConfig, "S6: what of a generation stage's output is kept")
    lwtr: LwTRConfig = section(LwTRConfig, "LwTR, label-wise token replacement")
    daga: DAGAConfig = section(DAGAConfig, "DAGA, an LSTM language model over linearized sentences")
    mulda: MulDAConfig = section(MulDAConfig, "MulDA, DAGA's linearization with mBART-50")
    llm: LLMConfig = section(LLMConfig, "an instruction-tuned LLM writing tagged sentences from a few gold ones")
    melm: MELMConfig = section(MELMConfig, "MELM, masked entity language modelling")
    analysis: AnalysisConfig = section(AnalysisConfig, "Table 3's perplexity")
    storage: StorageConfig = section(StorageConfig, "what a run keeps on disk")


def schema_keys(kind: type = None, prefix: str = "") -> dict[str, Any]:
    """Every key of the schema (dotted) -> its field, sections included (their own keys follow them)."""
    from dataclasses import fields, is_dataclass

    found: dict[str, Any] = {}
    for f in fields(kind or Config):
        name = prefix + f.name
        found[name] = f
        if is_dataclass(f.default_factory):
            found.update(schema_keys(f.default_factory, name + "."))
    return found


def key_help(name: str) -> str:
    """A schema key's meaning, with its choices and its bound when it has them."""
    f = schema_keys()[name]
    choices, check = f.metadata["choices"], f.metadata["check"]
    return (f.metadata["help"] + (f" [{' | '.join(str(c) for c in choices)}]" if choices else "")
            + (f"; bound: {check[1]}" if check else ""))


#: Each key with a fixed set of values, and those values (from the schema's metadata).
CHOICES: dict[str, tuple] = {k: f.metadata["choices"] for k, f in schema_keys().items() if f.metadata["choices"]}
#: Each key with a bound, and its bound.
CHECKS: dict[str, Check] = {k: f.metadata["check"] for k, f in schema_keys().items() if f.metadata["check"]}


class ConfigError(ValueError):
    pass


def _load_yaml_chain(path: Path, chosen: dict[str, str], seen: tuple[Path, ...] = ()) -> DictConfig:
    """Load a YAML file after the files it ``inherits`` (a name or list of names)."""
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if path in seen:
        raise ConfigError(f"{path}: circular 'inherits'")
    node = _load_yaml(path)
    _check_file(node, path, chosen)
    parents = node.pop("inherits", None) or []
    merged = OmegaConf.create()
    for parent in [parents] if isinstance(parents, str) else parents:
        merged = OmegaConf.merge(merged, _load_yaml_chain(_resolve_config_file(parent, path.parent), chosen,
                                                          seen + (path,)))
    return OmegaConf.merge(merged, node)


def _load_yaml(path: Path) -> DictConfig:
    """One config file, keys and their values; a YAML syntax error names the file and line, in one line."""
    try:
        node = OmegaConf.load(path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}"
                          f"{f' ({context})' if context else ''}") from None
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path}: the top level is a list; a config file maps keys to values (ner: {{epochs: 3}})")
    return node


def _check_file(node: DictConfig, path: Path, chosen: dict[str, str]) -> None:
    """A file may repeat ``profile`` and ``method`` but not change them (they choose the files read, so its
    value would be dropped); a misspelt ``method_overrides`` name would apply to no run."""
    for name, value in chosen.items():
        if name in node and node[name] != value:
            raise ConfigError(f"{path}: {name}: {node[name]} is read from the command line only (it chooses the "
                              f"files read); give {name}={node[name]} there")
    for name in node.get("method_overrides") or {}:
        if name not in METHODS:
            raise ConfigError(f"{path}: method_overrides.{name}: unknown method; known: {', '.join(METHODS)} "
                              f"(aclm/base/registry.py)")


def read_config_file(name: str, chosen: Optional[dict[str, str]] = None) -> DictConfig:
    """A ``--config`` file merged after the files it inherits."""
    return _load_yaml_chain(_resolve_config_file(name), chosen or {})


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

    chosen = {"profile": profile, "method": method}
    cfg = OmegaConf.structured(Config)
    profile_file = _resolve_config_file(profile, CONFIG_DIR / "profiles")
    profile_node = _load_yaml_chain(profile_file, chosen)
    # a profile's per-method values win over the method file (e.g. the released code keeps entity-free ACLM output)
    per_method = profile_node.pop("method_overrides", None) or {}
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; known: {', '.join(METHODS)} (aclm/base/registry.py)")
    method_file = METHODS[method].yaml      # a method with no settings of its own has none
    method_node = _load_yaml(method_file) if method_file.exists() else OmegaConf.create()
    _check_file(method_node, method_file, chosen)
    with open_dict(cfg):  # a method's own section (one the schema does not know) comes from its file, untyped
        for key in [k for k in method_node if k not in cfg]:
            cfg[key] = method_node[key]
    files = [read_config_file(f, chosen) for f in config_files or []]
    layers = {f"{profile_file} (or a file it inherits)": profile_node, str(method_file): method_node,
              f"{profile_file}: method_overrides.{method}": per_method.get(method) or {},
              **{str(name): node for name, node in zip(config_files or [], files)}, "the command line": cli}
    for source, layer in layers.items():
        try:
            cfg = OmegaConf.merge(cfg, layer)
        except Exception as err:
            raise ConfigError(merge_error(err, source)) from None
    cfg.profile, cfg.method = profile, method
    if not any("gold" in layer for layer in (*files, cli)):
        whole_folder(cfg)
    read_off(cfg)
    validate(cfg)
    return cfg


def merge_error(err: Exception, source: str) -> str:
    """omegaconf's complaint about ``source`` in one line: where, which key, what is wrong."""
    key = getattr(err, "full_key", None)
    return f"{source}: {key + ': ' if key else ''}{str(err).splitlines()[0]}"


def whole_folder(cfg: DictConfig) -> None:
    """A dataset folder trains whole unless ``gold=`` asks (a profile's ``gold`` is for the benchmarks)."""
    from aclm.base.datasets import registry

    if cfg.dataset not in registry():
        cfg.gold = "full"


def read_off(cfg: DictConfig) -> None:
    """YAML reads a bare ``off`` as false: where ``off`` is a choice, false means ``off``."""
    for key, allowed in CHOICES.items():
        if "off" in allowed and OmegaConf.select(cfg, key) == "False":
            OmegaConf.update(cfg, key, "off")


#: Values degenerate only beside another key's: (key, degenerate?, why, formatted with the config as ``c``).
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
    ("tuning.learning_rates", lambda c: c.method == "gold_only" and bool(c.tuning.learning_rates),
     "is not read by Gold-only, whose scores are S1's tagger's (shared by every method of the setting): "
     "run method=gold_only_tuned"),
)


def degenerate_values(cfg: DictConfig) -> str | None:
    """A one-line message for the first degenerate key (see :data:`Check`), or None."""
    for key, (allowed, why) in CHECKS.items():
        value = OmegaConf.select(cfg, key)
        if not allowed(value):
            return f"{key}={value!r}: {why}"
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
    for name in cfg.melm.code_mix_languages:
        problem = dataset_error(str(name))
        if problem:
            raise ConfigError(f"melm.code_mix_languages: {problem}")
    problem = language_error(cfg.dataset, cfg.language)
    if problem:
        raise ConfigError(problem)
    for key in ("variant", "setting_variant"):      # a folder's name in the run tree: seed<S>@<...>, <method>@<...>
        name = cfg[key]
        if name and (not name.strip() or any(part in name for part in ("/", "\\", ".."))):
            raise ConfigError(f"{key}={name!r} names a folder inside the run: give a name without /, \\ or .., "
                              f"and not blank ('' for none)")
    if not (isinstance(cfg.gold, int) or cfg.gold == "full"):
        raise ConfigError(f"gold={cfg.gold!r}: give a number of sentences or 'full'")
    if not (cfg.splits.dev_size in (None, "gold") or isinstance(cfg.splits.dev_size, int)):
        raise ConfigError(f"splits.dev_size={cfg.splits.dev_size!r}: give a number, 'gold' or null")
    try:
        layer_span(cfg.keywords.layers)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    problem = degenerate_values(cfg)
    if problem:
        raise ConfigError(problem)
