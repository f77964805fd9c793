"""The data check every run makes before it trains anything (and ``scripts/check_data.py`` alone).

It reads every file a setting uses (gold sample or its train set, dev, each test set) and the models it names;
errors (a missing or malformed file with its file and line) stop the run before S0, warnings are logged. The
list, for users: docs/configuration.md ("The data check"). Reads are cached per process by the files' sizes and
times, so a grid of many methods on one setting reads its files once.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base import registry
from aclm.base.config import ConfigError
from aclm.base.models import hub_revision, is_hub_id, load_path, model_path
from aclm.base.layers import NEEDS_ATTENTION, layer_indices
from aclm.base.data import DataError, TaggedSentence, first_mentions, first_spans, read_conll, token_source
from aclm.base.datasets import data_variant, get_spec, missing_hint, resolve_data_dir, run_spec
from aclm.stages.data import data_splits, member_config, sample_source, wanted_dev_size
from aclm.stages.scores import test_names

log = logging.getLogger("aclm.run.datacheck")

#: A project model folder that is missing, and the make target that builds it.
MODEL_TARGETS = {"models/tiny": "make tiny-models", "models/mini": "make mini-generator",
                 "models/mini-warm": "make warm-generator", "models/tiny-250k": "make real-vocab-models",
                 "models/paper_shape": "make paper-shape-models", "models/paper_shape_250k": "make paper-shape-models"}
#: Seconds the one probe of the Hugging Face hub waits for an answer.
HUB_PROBE_TIMEOUT = 3.0


@dataclass
class Report:
    """What the check found: errors stop a run, warnings are logged."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)     # file -> sentences
    lengths: list[str] = field(default_factory=list)        # what each length limit cuts, per dataset

    def raise_errors(self) -> None:
        if self.errors:
            more = f"\n  ({len(self.warnings)} warning(s) too)" if self.warnings else ""
            raise DataError("the data check failed before any training:\n  " + "\n  ".join(self.errors) + more)

    def log(self) -> None:
        for line in self.lengths:
            log.info("data check: %s", line)
        for message in self.warnings:
            log.warning("data check: %s", message)


# --- the files a setting reads ---------------------------------------------------------------

def setting_files(cfg: DictConfig) -> dict[str, Path]:
    """Role -> file for every file a setting reads: its train source, dev, and each test set."""
    spec = get_spec(cfg.dataset)
    if spec.union:
        return {role: path for member in spec.union for role, path in setting_files(member_config(cfg, member)).items()}
    base = resolve_data_dir(cfg.data_dir)
    train = spec.samples[cfg.gold] if sample_source(cfg) == "released" else spec.train
    files = {f"{cfg.dataset} train": spec.path(train, base)} if train else {}
    if spec.dev:
        files[f"{cfg.dataset} dev"] = spec.path(spec.dev, base)
    for name in test_names(cfg):
        test = get_spec(name)
        if test.test is None:
            raise DataError(f"dataset {name!r} has no test file, and runs are scored on one: "
                            f"add test.conll (or .conllu, .tsv, .txt) to {Path(test.train or '.').parent}")
        files[f"{name} test"] = test.path(test.test, base)
    return files


def dataset_of(role: str) -> str:
    """The dataset of a :func:`setting_files` role (``<dataset> <train|dev|test>``; a folder name may hold spaces)."""
    return role.rsplit(" ", 1)[0]


def missing_files(files: dict[str, Path], cfg: DictConfig) -> list[str]:
    """``<file>: missing (<role>); <what to do>`` for each file not there, the data folder named in the hint."""
    base = str(resolve_data_dir(cfg.data_dir))
    return [f"{path}: missing ({role}); {missing_hint(get_spec(dataset_of(role))).replace('<data_dir>', base)}"
            for role, path in files.items() if not path.exists()]


def model_keys(cfg: DictConfig, reads: Sequence[str] | None = None) -> list[str]:
    """The config keys naming a model this run loads (with ``reads``: only those of the stages that will run)."""
    method = registry.get(cfg.method)
    keys = ["ner.model"]
    if method.generation == "aclm":
        keys.append("generator.model")
        if cfg.generation.mixner.mode != "off":
            keys.append("generation.mixner.embedder")
    keys += [f"{section}.model" for section in method.keys if OmegaConf.select(cfg, f"{section}.model")]
    if "generation.mixner.embedder" in method.keys and cfg.melm.code_mix:   # MELM's code-mixing embeds with it
        keys.append("generation.mixner.embedder")
    if reads is not None:
        keys = [k for k in keys if any(k == r or k.startswith(r + ".") for r in reads)]
    return keys


def built_here(cfg: DictConfig) -> list[str]:
    """The ``models/<folder>/manifest.json`` (a make target) of each model this run loads that is built here."""
    paths = [Path(str(OmegaConf.select(cfg, key)).removeprefix("encoder:")) for key in model_keys(cfg)]
    return sorted({f"models/{p.parts[1]}/manifest.json" for p in paths if len(p.parts) > 2 and p.parts[0] == "models"})


def model_problems(cfg: DictConfig, reads: Sequence[str] | None = None) -> dict[str, str]:
    """Config key -> why the model it names cannot load here, for each model the run loads (:func:`model_keys`)."""
    named = {key: str(OmegaConf.select(cfg, key)) for key in model_keys(cfg, reads)}
    return {key: problem for key, name in named.items() if (problem := model_problem(key, name))}


def model_problem(key: str, name: str) -> str | None:
    """Why model ``name`` (of config ``key``) cannot load here, or None: a folder must exist, a hub id be cached or
    the hub answer one quick probe (transformers alone would retry for a minute, then fail mid-stage)."""
    try:
        path = model_path(name)
    except ConfigError as err:
        return f"{err} ({key})"
    if Path(path).is_dir():
        return None
    target = next((t for prefix, t in MODEL_TARGETS.items() if name.startswith(prefix + "/")), None)
    if target:
        return f"{key}={name}: the model folder does not exist; build it with `{target}`"
    if not is_hub_id(path):
        return f"{key}={name}: no such model folder"
    if Path(load_path(path)).is_dir() or (unreachable := hub_unreachable()) is None:
        return None
    from huggingface_hub import constants

    cached = "has only part of it (no weights)" if hub_revision(path) else "does not hold it"
    return (f"model {name} ({key}) is not a local folder, the Hugging Face cache ({constants.HF_HUB_CACHE}) "
            f"{cached}, and the hub is unreachable ({unreachable}): download it where there is a network, or "
            f"point {key} at a local folder")


@lru_cache(maxsize=1)
def hub_unreachable() -> str | None:
    """Why the hub cannot be reached (offline mode, or no answer to one HEAD request in time), or None."""
    import requests
    from huggingface_hub import constants

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").upper() in ("1", "ON", "YES", "TRUE"):
            return f"{var}={os.environ[var]}"
    try:
        requests.head(constants.ENDPOINT, timeout=HUB_PROBE_TIMEOUT, allow_redirects=False)
    except requests.RequestException as err:
        return f"{constants.ENDPOINT} did not answer: {innermost(err)}"
    return None


def innermost(err: BaseException) -> BaseException:
    """The exception at the bottom of a chain (requests wraps the socket's error in three others)."""
    while True:
        inner = getattr(err, "reason", None) or err.__cause__ or err.__context__
        if not isinstance(inner, BaseException):
            return err
        err = inner


def code_mix_problem(cfg: DictConfig) -> str | None:
    """MELM's code-mixing on one language with no other to borrow from (it would run without code-mixing), or
    borrowing from the gold data's own language (MELM would fail once S1 had trained)."""
    if "melm" not in registry.get(cfg.method).keys or not cfg.melm.code_mix:
        return None
    spec = run_spec(cfg)
    if spec.union:                      # a union borrows from its own languages
        return None
    names = list(cfg.melm.code_mix_languages)
    if not names:
        return (f"melm.code_mix_languages=[] with melm.code_mix=true on {cfg.dataset} (one language) borrows from "
                f"none, and MELM would run without code-mixing; name the datasets to borrow from (e.g. "
                f"[conll2003/de]), or melm.code_mix=false")
    own = [name for name in names if get_spec(name).language == spec.language]
    if own:
        return (f"melm.code_mix_languages=[{', '.join(names)}] names {', '.join(own)}, in {spec.language!r} like "
                f"{cfg.dataset}: code-mixing borrows entities from other languages; name datasets in another "
                f"language, or melm.code_mix=false")
    return None


def sample_problems(cfg: DictConfig, counts: dict[str, int]) -> tuple[list[str], list[str]]:
    """Errors: a ``gold`` sample as large as the train set it is drawn from (a released sample has its own
    size); warnings: a dev set S0 takes from the train set, for a dataset without one."""
    spec = get_spec(cfg.dataset)
    if spec.union:
        found = [sample_problems(member_config(cfg, member), counts) for member in spec.union]
        return [e for errors, _ in found for e in errors], [w for _, warnings in found for w in warnings]
    n = counts.get(f"{cfg.dataset} train")
    if n is None or sample_source(cfg) == "released":
        return [], []
    gold = 0 if cfg.gold == "full" else cfg.gold
    if gold and gold >= n:
        how = "larger than" if gold > n else "all of"
        return [f"gold={gold} is {how} {cfg.dataset}'s training set ({n} sentences); give fewer, or gold=full"], []
    if spec.dev:
        return [], []
    carve = wanted_dev_size(cfg, gold) or n // 10
    if not 0 < carve < n - gold:
        return [f"{cfg.dataset} has no dev file, and S0 cannot take {carve} dev sentences from the {n - gold} "
                f"training sentences the gold sample leaves; add a dev file, or set splits.dev_size"], []
    return [], [f"{cfg.dataset} has no dev file: S0 takes {carve} of the {n} sentences of its train set "
                f"({spec.path(spec.train, resolve_data_dir(cfg.data_dir))}) as its dev set"]


# --- what the sentences say ------------------------------------------------------------------

def tag_problems(sentences: Sequence[TaggedSentence], canonical: bool = True) -> tuple[list[str], list[str]]:
    """Errors (non-canonical case, unless ``canonical`` is off) and warnings (IOB1 openings) of the tags, with lines."""
    errors, warnings = [], []
    rewritten = [(f"{s.meta.get('source', '?').rsplit(':', 1)[0]}:{line}", raw)
                 for s in sentences for _, line, raw in s.meta.get("rewritten_tags", ())]
    iob1 = sum(raw[0] == "I" for _, raw in rewritten)      # upper-case I- opening an entity: only the scheme differs
    case = [(where, raw) for where, raw in rewritten if raw[0] != "I"]
    if case and canonical:
        where, raw = case[0]
        errors.append(f"{where}: tag {raw!r} is not upper-case BIO (as B-X/I-X, {raw.upper()!r}); "
                      f"{len(case)} such tag(s) in all. Fix the file (a lower-case tag beside upper-case ones "
                      f"is usually a typo), or accept them with data_check.canonical_tags=false")
    if iob1:
        warnings.append(f"{iob1} entities open with I- (IOB1); they are read as B- (IOB2)")
    return errors, warnings


def undeclared_types(read: dict[str, Sequence[TaggedSentence]]) -> list[str]:
    """Each file's first entity of a type its dataset does not declare (``types`` in configs/datasets.yaml): a
    union's members, and test sets of other datasets, against their own (role -> sentences, as read)."""
    errors = []
    for role, found in read.items():
        dataset = dataset_of(role)
        declared = get_spec(dataset).types or ()
        errors += [f"{where}: entity type {etype!r} is not one of {dataset}'s types ({', '.join(sorted(declared))})"
                   for etype, where in first_mentions(found).items() if declared and etype not in declared]
    return list(dict.fromkeys(errors))          # one file in two roles is said once


def case_clashes(sentences: Sequence[TaggedSentence]) -> list[str]:
    """Types that differ only in case (``PER``, ``per``): both are the label token ``<b-per>``, so generation would
    fail after S4's training; ``data_check.canonical_tags`` rewrites only all-lower-case tags (``b-per``)."""
    first: dict[str, tuple[str, str]] = {}
    errors = []
    for etype, where in first_mentions(sentences).items():
        other, other_where = first.setdefault(etype.lower(), (etype, where))
        if other != etype:
            errors.append(f"{where}: entity type {etype!r} differs from {other!r} ({other_where}) only in case, "
                          f"and both would be the label token <b-{etype.lower()}>; spell them alike")
    return errors


def unseen_test_types(read: dict[str, Sequence[TaggedSentence]]) -> list[str]:
    """Each test set with types no training file has: scoring would refuse it, but only after all the training."""
    trained = {etype for role, found in read.items() if role.endswith(" train") for s in found
               for etype in s.entity_types}
    errors = []
    for role, found in read.items():
        if not role.endswith(" test"):
            continue
        unseen = {etype: where for etype, where in first_mentions(found).items() if etype not in trained}
        if unseen:
            errors.append(f"{next(iter(unseen.values()))}: test set {dataset_of(role)!r} has entity "
                          f"type(s) {sorted(unseen)} that the training data does not ({', '.join(sorted(trained))}); "
                          f"the tagger could never predict them")
    return errors


def sample_lacks_test_types(cfg: DictConfig, read: dict[str, Sequence[TaggedSentence]]) -> list[str]:
    """Types a test set has and the gold sample lacks (a rare type a small sample missed): scoring would refuse the
    test set after all the training.  The sample is drawn here as S0 draws it (a second or less)."""
    sampled = {etype for s in data_splits(cfg)[0] for etype in s.entity_types}
    tested = {etype: dataset_of(role) for role, found in read.items() if role.endswith(" test")
              for s in found for etype in s.entity_types}
    missing = sorted(set(tested) - sampled)
    if not missing:
        return []
    return [f"the gold sample (gold={cfg.gold}, splits.seed={cfg.splits.seed}) has no {', '.join(missing)} "
            f"entities, which test set {tested[missing[0]]!r} has: the tagger could never predict them; "
            f"give a larger gold= or another splits.seed"]


def rare_types(sentences: Sequence[TaggedSentence], minimum: int) -> list[str]:
    """Types found in fewer than ``minimum`` sentences (over every file the setting reads)."""
    counts: Counter = Counter(etype for s in sentences for etype in s.entity_types)
    where: dict[str, list[str]] = defaultdict(list)
    for s in sentences:
        for etype, start in first_spans(s).items():
            if counts[etype] < minimum:
                where[etype].append(token_source(s, start))
    return [f"{places[0]}: entity type {etype!r} occurs in only {counts[etype]} sentence(s) of all the files "
            f"(fewer than data_check.min_type_sentences={minimum}): a misspelt tag? "
            f"({', '.join(places[:3])})" for etype, places in sorted(where.items())]


@lru_cache(maxsize=4)
def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(load_path(model))    # a folder or a cached hub model: no hub asked


def long_sentences(sentences: Sequence[TaggedSentence], model: str, limit: int) -> list[str]:
    """How many sentences the encoder cuts at ``limit`` sub-tokens (counted with its own tokenizer)."""
    try:
        tokenizer = load_tokenizer(model)
    except (OSError, ValueError) as err:
        return [f"sentence lengths not checked: the tokenizer of ner.model={model} did not load ({err})"]
    limit = min(limit, tokenizer.model_max_length)
    encoded = tokenizer([s.tokens for s in sentences], is_split_into_words=True,
                        verbose=False)      # the long ones are counted here, not warned of one by one
    lengths = [len(ids) for ids in encoded["input_ids"]]
    over = [(n, s) for n, s in zip(lengths, sentences) if n > limit]
    if not over:
        return []
    n, longest = max(over, key=lambda pair: pair[0])
    return [f"{len(over)} sentence(s) are longer than the encoder's {limit} sub-tokens and are cut there "
            f"(S2 gives them no keywords); the longest: {longest.meta.get('source', '?')}, {len(longest)} words, "
            f"{n} sub-tokens"]


def generator_cuts(cfg: DictConfig, read: dict[str, Sequence[TaggedSentence]]) -> tuple[list[str], list[str]]:
    """Per training dataset, the shares of S4's targets and S5's outputs that the generator's length limits
    cut, counted with its tokenizer (lines to print, warnings for a share over 1%)."""
    from aclm.steps.lengths import WARN_SHARE, labelled
    from aclm.steps.lengths import generator_cuts as cuts_of

    if registry.get(cfg.method).generation != "aclm":
        return [], []
    try:
        tokenizer = load_tokenizer(str(cfg.generator.model))
    except (OSError, ValueError) as err:
        return [], [f"generation lengths not checked: the tokenizer of generator.model={cfg.generator.model} "
                    f"did not load ({err})"]
    trains = {dataset_of(role): sentences for role, sentences in read.items() if role.endswith(" train")}
    tokenizer = labelled(tokenizer, [s for sentences in trains.values() for s in sentences])
    lines, warnings = [], []
    for dataset, sentences in trains.items():
        try:
            cuts = cuts_of(tokenizer, sentences, run_spec(cfg, dataset).language, cfg.generator.max_length,
                           cfg.generation.max_length, cfg.generation.mixner.mode != "off")
        except ValueError as err:              # a language the generator has no code for
            warnings.append(f"{dataset}: generation lengths not checked ({err})")
            continue
        lines.append(f"{dataset} lengths: " + "; ".join(map(str, cuts)))
        warnings += [f"{dataset}: {cut} (docs/languages.md)" for cut in cuts if cut.share > WARN_SHARE]
    return lines, warnings


def layers_problem(cfg: DictConfig, reads: Sequence[str] | None = None) -> str | None:
    """``keywords.layers`` against the encoder whose attention S2 reads (``ner.model``): a range past its
    layers would stop the run at S2, after S1 has trained.  A model that does not load is said elsewhere."""
    if registry.get(cfg.method).generation != "aclm" or cfg.keywords.selection not in NEEDS_ATTENTION:
        return None
    if reads is not None and not any(r == "keywords" or r.startswith("keywords.") for r in reads):
        return None
    from transformers import AutoConfig

    try:
        layers = AutoConfig.from_pretrained(load_path(cfg.ner.model))
    except (OSError, ValueError):
        return None
    try:
        layer_indices(cfg.keywords.layers, layers.num_hidden_layers)
    except ValueError as err:
        return f"{err}: ner.model={cfg.ner.model}, whose attention S2 reads"
    return None


# --- the check ---------------------------------------------------------------------------------

def check_setting(cfg: DictConfig, reads: Sequence[str] | None = None) -> Report:
    """Check every file and model a setting reads; never raises for what it finds (see Report)."""
    models = model_problems(cfg, reads)
    layers = None if "ner.model" in models else layers_problem(cfg, reads)
    report = Report(errors=[*models.values(), *filter(None, [code_mix_problem(cfg), layers])])
    try:
        files = setting_files(cfg)
    except (DataError, KeyError) as err:
        report.errors.append(str(err).strip("'\""))
        return report
    report.errors += missing_files(files, cfg)
    variant = data_variant(cfg.dataset, cfg.data_dir)
    if variant:
        report.warnings.append(f"{cfg.dataset}: files differ from the published ones (configs/data.sha256): its "
                               f"runs go to a folder of their own, {cfg.dataset}+{variant}/")
    read: dict[str, list[TaggedSentence]] = {}
    for role, path in files.items():
        if not path.exists():
            continue
        try:
            read[role] = _read(role, path)
        except DataError as err:
            report.errors.append(str(err))
        else:
            report.files[str(path)] = len(read[role])
    sentences = [s for found in read.values() for s in found]
    errors, warnings = sample_problems(cfg, {role: len(found) for role, found in read.items()})
    report.errors += errors
    report.warnings += warnings
    if not sentences:
        return report
    errors, warnings = tag_problems(sentences, cfg.data_check.canonical_tags)
    report.errors += errors + undeclared_types(read) + case_clashes(sentences)
    report.errors += rare_types(sentences, cfg.data_check.min_type_sentences)
    trains = [role for role in files if role.endswith(" train")]
    if trains and all(role in read for role in trains):
        report.errors += unseen_test_types(read)
    if not report.errors:
        report.errors += sample_lacks_test_types(cfg, read)
    report.warnings += warnings
    if "ner.model" not in models:
        report.warnings += long_sentences(sentences, cfg.ner.model, cfg.keywords.max_subtokens)
    if "generator.model" not in models and "generator.model" in model_keys(cfg, reads):
        report.lengths, warnings = generator_cuts(cfg, read)
        report.warnings += warnings
    return report


def _read(role: str, path: Path) -> list[TaggedSentence]:
    spec, stat = get_spec(dataset_of(role)), path.stat()
    return list(_cached_read(str(path), stat.st_size, stat.st_mtime_ns, spec.format, spec.empty_token))


@lru_cache(maxsize=32)
def _cached_read(path: str, size: int, mtime_ns: int, fmt: str, empty_token: str | None
                 ) -> tuple[TaggedSentence, ...]:
    return tuple(read_conll(path, fmt, empty_token))


def preflight(cfg: DictConfig, reads: Sequence[str] | None = None) -> Report:
    """The check a run makes first: errors raise :class:`DataError` (nothing has trained yet).  ``reads``: the
    config keys of the stages that will run, so that a run stopping at S2 needs no generator."""
    start = time.perf_counter()
    report = check_setting(cfg, reads)
    report.log()
    report.raise_errors()
    log.info("data check: %d file(s), %d sentences, %d warning(s), %.1f s", len(report.files),
             sum(report.files.values()), len(report.warnings), time.perf_counter() - start)
    return report
