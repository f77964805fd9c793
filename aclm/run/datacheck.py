"""The data check every run makes before it trains anything (and ``scripts/check_data.py`` alone).

It reads every file a setting will use (the gold sample or the train set it
is drawn from, dev, each test set) and the models it names, and sorts what it
finds into errors, which stop the run before S0, and warnings, which are
logged.  What is which:

errors
    a file that is missing or malformed (with file and line); a model folder
    of the project's that was not built (naming the make target that builds
    it); a tag whose case is not canonical (``b-per``: as the other spelling
    of ``B-PER`` it is almost always a mistake; the message says how to
    accept it); an entity type the dataset does not declare (``types:`` in
    ``configs/datasets.yaml``); a type found in fewer than
    ``data_check.min_type_sentences`` sentences of all the files together
    (``B-PRE`` once among 20,000 sentences is a typo, not a type);
warnings
    ``I-`` tags opening an entity (IOB1, read as ``B-``); sentences longer
    than the encoder's sub-token limit, with how many are cut.

Results are cached per process by the files' sizes and times, so a grid of
many methods on one setting reads its files once.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base.data import DataError, TaggedSentence, read_conll
from aclm.base.datasets import get_spec, resolve_data_dir
from aclm.base.paths import PROJECT_ROOT
from aclm.run.gold import member_config, sample_source, test_names

log = logging.getLogger("aclm.run.datacheck")

#: A project model folder that is missing, and the make target that builds it.
MODEL_TARGETS = {"models/tiny": "make tiny-models", "models/mini": "make mini-generator",
                 "models/paper_shape": "make paper-shape-models"}
@dataclass
class Report:
    """What the check found: errors stop a run, warnings are logged."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)     # file -> sentences

    def raise_errors(self) -> None:
        if self.errors:
            more = f"\n  ({len(self.warnings)} warning(s) too)" if self.warnings else ""
            raise DataError("the data check failed before any training:\n  " + "\n  ".join(self.errors) + more)

    def log(self) -> None:
        for message in self.warnings:
            log.warning("data check: %s", message)


# --- the files a setting reads ---------------------------------------------------------------

def setting_files(cfg: DictConfig) -> dict[str, Path]:
    """Role -> file for every file a setting reads: its train source, dev, and each test set."""
    spec = get_spec(cfg.dataset)
    if spec.union:
        files: dict[str, Path] = {}
        for member in spec.union:
            files |= setting_files(member_config(cfg, member))
        return files
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


def missing_files(files: dict[str, Path], cfg: DictConfig) -> list[str]:
    problems = []
    for role, path in files.items():
        if not path.exists():
            obtain = get_spec(role.split()[0]).obtain
            hint = f"; {obtain}" if obtain else "; set data_dir (or ACLM_DATA_DIR) to the folder that holds it"
            problems.append(f"{path}: missing ({role}){hint}")
    return problems


def model_keys(cfg: DictConfig) -> list[str]:
    """The config keys naming a model this run's method loads."""
    from aclm.base import registry

    method = registry.get(cfg.method)
    keys = ["ner.model"]
    if method.generation == "aclm":
        keys += ["generator.model", "generation.mixner.embedder"]
    return keys + [f"{section}.model" for section in method.reads if OmegaConf.select(cfg, f"{section}.model")]


def missing_models(cfg: DictConfig) -> list[str]:
    """A project model folder (``models/...``) the run loads and nobody built, with the make target."""
    problems = []
    for key in model_keys(cfg):
        name = str(OmegaConf.select(cfg, key))
        target = next((t for prefix, t in MODEL_TARGETS.items() if name.startswith(prefix + "/")), None)
        if target and not (Path(name).exists() or (PROJECT_ROOT / name).exists()):
            problems.append(f"{key}={name}: the model folder does not exist; build it with `{target}`")
    return problems


# --- what the sentences say ------------------------------------------------------------------

def tag_problems(sentences: Sequence[TaggedSentence], declared: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """Errors (non-canonical case, undeclared types) and warnings (IOB1 openings) of the tags, with lines."""
    errors, warnings = [], []
    case: list[tuple[str, str]] = []
    iob1 = 0
    for s in sentences:
        path = s.meta.get("source", "?").rsplit(":", 1)[0]
        for _, line, raw in s.meta.get("rewritten_tags", ()):
            if raw[0] == "I":    # upper-case I- opening an entity: only the scheme differs
                iob1 += 1
            else:
                case.append((f"{path}:{line}", raw))
    if case:
        where, raw = case[0]
        errors.append(f"{where}: tag {raw!r} is not upper-case BIO (as B-X/I-X, {raw.upper()!r}); "
                      f"{len(case)} such tag(s) in all. Fix the file (a lower-case tag beside upper-case ones "
                      f"is usually a typo), or accept them with data_check.canonical_tags=false")
    if iob1:
        warnings.append(f"{iob1} entities open with I- (IOB1); they are read as B- (IOB2)")
    if declared:
        for etype, where in first_mentions(sentences).items():
            if etype not in declared:
                errors.append(f"{where}: entity type {etype!r} is not one of the dataset's types "
                              f"({', '.join(sorted(declared))})")
    return errors, warnings


def first_mentions(sentences: Iterable[TaggedSentence]) -> dict[str, str]:
    """Each entity type and where it first occurs (file:line of its sentence)."""
    first: dict[str, str] = {}
    for s in sentences:
        for etype in sorted(s.entity_types):
            first.setdefault(etype, s.meta.get("source", "?"))
    return first


def rare_types(sentences: Sequence[TaggedSentence], minimum: int) -> list[str]:
    """Types found in fewer than ``minimum`` sentences (over every file the setting reads)."""
    counts: Counter = Counter(etype for s in sentences for etype in s.entity_types)
    where: dict[str, list[str]] = defaultdict(list)
    for s in sentences:
        for etype in s.entity_types:
            if counts[etype] < minimum:
                where[etype].append(s.meta.get("source", "?"))
    return [f"{places[0]}: entity type {etype!r} occurs in only {counts[etype]} sentence(s) of all the files "
            f"(fewer than data_check.min_type_sentences={minimum}): a misspelt tag? "
            f"({', '.join(places[:3])})" for etype, places in sorted(where.items())]


@lru_cache(maxsize=4)
def _tokenizer(model: str):
    from transformers import AutoTokenizer

    from aclm.base.config import model_path

    return AutoTokenizer.from_pretrained(model_path(model))


def long_sentences(sentences: Sequence[TaggedSentence], model: str, limit: int) -> list[str]:
    """How many sentences the encoder cuts at ``limit`` sub-tokens (counted with its own tokenizer)."""
    try:
        tokenizer = _tokenizer(model)
    except (OSError, ValueError) as err:
        return [f"sentence lengths not checked: the tokenizer of ner.model={model} did not load ({err})"]
    limit = min(limit, tokenizer.model_max_length)
    lengths = [len(ids) for ids in tokenizer([s.tokens for s in sentences], is_split_into_words=True)["input_ids"]]
    over = [(n, s) for n, s in zip(lengths, sentences) if n > limit]
    if not over:
        return []
    n, longest = max(over, key=lambda pair: pair[0])
    return [f"{len(over)} sentence(s) are longer than the encoder's {limit} sub-tokens and are cut there "
            f"(S2 gives them no keywords); the longest: {longest.meta.get('source', '?')}, {len(longest)} words, "
            f"{n} sub-tokens"]


# --- the check ---------------------------------------------------------------------------------

def check_setting(cfg: DictConfig) -> Report:
    """Check every file and project model a setting reads; never raises for what it finds (see Report)."""
    report = Report(errors=missing_models(cfg))
    try:
        files = setting_files(cfg)
    except (DataError, KeyError) as err:
        report.errors.append(str(err).strip("'\""))
        return report
    report.errors += missing_files(files, cfg)
    sentences: list[TaggedSentence] = []
    for role, path in files.items():
        if not path.exists():
            continue
        try:
            found = _read(path, *_reader_settings(role))
        except DataError as err:
            report.errors.append(str(err))
            continue
        report.files[str(path)] = len(found)
        sentences += found
    if not sentences:
        return report
    declared = get_spec(cfg.dataset).types if not get_spec(cfg.dataset).union else None
    errors, warnings = tag_problems(sentences, declared)
    if not cfg.data_check.canonical_tags:
        errors = [e for e in errors if "upper-case BIO" not in e]
    report.errors += errors + rare_types(sentences, cfg.data_check.min_type_sentences)
    report.warnings += warnings + long_sentences(sentences, cfg.ner.model, cfg.keywords.max_subtokens)
    return report


def _reader_settings(role: str) -> tuple[str, str | None]:
    spec = get_spec(role.rsplit(" ", 1)[0])
    return spec.format, spec.empty_token


def _read(path: Path, fmt: str, empty_token: str | None) -> list[TaggedSentence]:
    stat = path.stat()
    return list(_cached_read(str(path), stat.st_size, stat.st_mtime_ns, fmt, empty_token))


@lru_cache(maxsize=32)
def _cached_read(path: str, size: int, mtime_ns: int, fmt: str, empty_token: str | None
                 ) -> tuple[TaggedSentence, ...]:
    return tuple(read_conll(path, fmt, empty_token))


def preflight(cfg: DictConfig) -> Report:
    """The check a run makes first: errors raise :class:`DataError` (nothing has trained yet)."""
    start = time.perf_counter()
    report = check_setting(cfg)
    report.log()
    report.raise_errors()
    log.info("data check: %d file(s), %d sentences, %d warning(s), %.1f s", len(report.files),
             sum(report.files.values()), len(report.warnings), time.perf_counter() - start)
    return report
