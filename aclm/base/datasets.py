"""The dataset registry: names such as ``multiconer/en`` (``configs/datasets.yaml``) mapped to local files.

:func:`fetch_from_hub` is the only code path that needs a network: runs read files only, hashed by
content, so a dataset updated on the hub never stands behind a cached result. An unknown name may be a
dataset folder, whose entry is built on the fly (docs/configuration.md, "Datasets and methods of your own").
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

import yaml
from omegaconf import OmegaConf

from aclm.base.data import FORMATS, DataError, TaggedSentence, normalise_tags, read_conll
from aclm.base.io import file_digest, split_lines
from aclm.base.paths import CONFIG_DIR, PROJECT_ROOT

ROOTS = ("data", "project", "absolute")
#: The file names a dataset folder may use for each split, each with one of FOLDER_EXTENSIONS.
FOLDER_SPLITS = {"train": ("train",), "dev": ("dev", "val", "valid", "validation"), "test": ("test",)}
FOLDER_EXTENSIONS = (".conll", ".conllu", ".tsv", ".txt")
#: Where a folder's runs live in the run tree: ``local/<folder name>-<hash of its absolute path>``.
LOCAL_RUN_PREFIX = "local"

log = logging.getLogger("aclm.base.datasets")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    language: Optional[str]              # None: a folder whose language its text does not tell (see run_spec)
    train: Optional[str] = None
    dev: Optional[str] = None
    test: Optional[str] = None
    format: str = "auto"
    root: str = "data"                   # data | project | absolute (paths as they are: a dataset folder's)
    samples: dict = field(default_factory=dict)
    hf: Optional[dict] = None
    union: list = field(default_factory=list)   # member datasets (the multilingual setting)
    empty_token: Optional[str] = None           # stand-in for empty tokens (else they are an error)
    run_name: Optional[str] = None              # its directory in the run tree (default: the name)
    obtain: Optional[str] = None                # where users get files the data folder does not ship
    types: Optional[list] = None                # the entity types it declares (the data check holds files to them)
    test_sets: dict = field(default_factory=dict)  # test_set name -> the entry a grid runs instead

    def __post_init__(self) -> None:
        if self.root not in ROOTS:
            raise TypeError(f"root {self.root!r} is not one of {ROOTS}")
        if self.format not in FORMATS:
            raise TypeError(f"format {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.run_name is None:
            object.__setattr__(self, "run_name", self.name)

    def path(self, rel: str, data_dir: str | Path) -> Path:
        if self.root == "absolute":
            return Path(rel)
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


def get_spec(name: str, language: str | None = None) -> DatasetSpec:
    """The registry's entry for ``name``, or its dataset folder's (``language`` None: detected)."""
    specs = registry()
    if name in specs:
        return specs[name]
    problem = dataset_error(name)
    if problem:
        raise KeyError(problem)
    return folder_spec(name, find_folder(name), language)


def run_spec(cfg, name: str | None = None) -> DatasetSpec:
    """Dataset ``name``'s entry (None: the run's own, in its config's ``language``); a DataError asking for
    ``language=`` when neither config nor text tells."""
    if name is not None and name != cfg.dataset:
        return get_spec(name)
    spec = get_spec(cfg.dataset, OmegaConf.select(cfg, "language"))   # a stage's view holds it only when set
    if spec.language is None:
        detect_language(Path(spec.train))               # raises, with the evidence
    return spec


def dataset_error(name: str) -> str | None:
    """Why ``name`` names no usable dataset (a message for the user), or None."""
    specs = registry()
    if name in specs:
        return None
    folder = find_folder(name)
    if folder is None:
        path = Path(name).expanduser()
        where = [str(path)] if path.is_absolute() else list(dict.fromkeys(str(base / path)
                                                                          for base in (Path.cwd(), PROJECT_ROOT)))
        return (f"unknown dataset {name!r}: not in {CONFIG_DIR / 'datasets.yaml'} (known: {', '.join(sorted(specs))}) "
                f"and no folder {' or '.join(where)}; give a registered name or a folder holding {_expected('train')}")
    try:
        files = folder_files(folder)
    except DataError as err:
        return str(err)
    if files["train"] is None:
        found = sorted(p.name for p in folder.iterdir())[:20]
        return (f"dataset folder {folder} holds no training file: expected {_expected('train')} "
                f"(and optionally dev, test); found: {', '.join(found) or 'nothing'}")
    return None


def _expected(split: str) -> str:
    names = [f"{stem}{ext}" for stem in FOLDER_SPLITS[split] for ext in FOLDER_EXTENSIONS]
    return f"{names[0]} (or {', '.join(names[1:])})"


def find_folder(name: str) -> Path | None:
    """The directory ``name`` names (absolute, or relative to the working directory, then the project root)."""
    path = Path(name).expanduser()
    for candidate in [path] if path.is_absolute() else [Path.cwd() / path, PROJECT_ROOT / path]:
        if candidate.is_dir():
            return candidate.resolve()
    return None


def folder_files(folder: Path) -> dict[str, Path | None]:
    """Each split's file in a dataset folder (None when absent); two candidates for one split are an error."""
    files: dict[str, Path | None] = {}
    for split, stems in FOLDER_SPLITS.items():
        found = [folder / f"{stem}{ext}" for stem in stems for ext in FOLDER_EXTENSIONS
                 if (folder / f"{stem}{ext}").is_file()]
        if len(found) > 1:
            raise DataError(f"dataset folder {folder} has several {split} files ({', '.join(p.name for p in found)}); "
                            f"keep one")
        files[split] = found[0] if found else None
    return files


def local_run_name(folder: Path) -> str:
    """``local/<folder name>-<8 hex digits of its absolute path>``: a safe relative path, one per folder."""
    folder = folder.resolve()
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", folder.name).strip("._") or "data"
    return f"{LOCAL_RUN_PREFIX}/{stem}-{hashlib.sha256(str(folder).encode()).hexdigest()[:8]}"


def run_name(name: str) -> str:
    """A dataset's run-tree directory, without reading files; a folder gets ``local/<folder>-<hash>``
    (an absolute or ``..`` path must never be joined to the run dir)."""
    specs = registry()
    if name in specs:
        return specs[name].run_name
    folder = find_folder(name)
    return local_run_name(folder) if folder is not None else name


def language_error(name: str, language: str | None) -> str | None:
    """Why ``language`` cannot go with dataset ``name`` (not ISO 639, or registered otherwise), or None."""
    if language is not None and not re.fullmatch(r"[a-z]{2,3}", language):
        return f"language={language!r}: give an ISO 639-1 code such as en, de, zh"
    specs = registry()
    if name in specs and language is not None and language != specs[name].language:
        return (f"language={language!r} is for dataset folders; {name} is registered as {specs[name].language!r} "
                f"({CONFIG_DIR / 'datasets.yaml'})")
    return None


@lru_cache(maxsize=None)
def folder_spec(name: str, folder: Path, language: str | None = None) -> DatasetSpec:
    """The entry of a dataset folder: its files as they are, columns detected, the language given or detected."""
    files = folder_files(folder)
    if files["train"] is None:
        raise KeyError(dataset_error(name))
    if language is None:
        try:
            language = detect_language(files["train"])
        except DataError as err:                         # only the run's language needs it (run_spec)
            log.info("%s", err)
    else:
        log.info("dataset folder %s: language %r (as given by language=)", folder, language)
    return DatasetSpec(name=name, language=language, root="absolute", format="auto",
                       **{split: str(path) if path else None for split, path in files.items()},
                       run_name=local_run_name(folder))


def detect_language(path: Path, max_words: int = 20_000) -> str:
    """The language whose ``stopwordsiso`` list covers the largest share of the file's words (tokens with a
    letter, lower-cased); under 1% for every language is an error asking for ``language=``."""
    import stopwordsiso

    words: Counter = Counter()
    for sentence in read_conll(path):
        words.update(t.lower() for t in sentence.tokens if any(c.isalpha() for c in t))
        if sum(words.values()) >= max_words:
            break
    total = sum(words.values())
    shares = {}
    for language in sorted(stopwordsiso.langs()):
        stop = {w.lower() for w in stopwordsiso.stopwords(language)}
        shares[language] = sum(n for w, n in words.items() if w in stop) / total if total else 0.0
    ranked = sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))
    (best, share), runners = ranked[0], ranked[1:4]
    evidence = (f"stop words of {best!r} are {share:.1%} of its {total} words; next "
                + ", ".join(f"{lang} {value:.1%}" for lang, value in runners))
    if share < 0.01:
        raise DataError(f"{path}: cannot tell its language ({evidence}); set it with language=<ISO 639-1 code>")
    log.info("dataset folder %s: language %r detected from %s (%s); set language=<code> to override",
             path.parent, best, path.name, evidence)
    return best


#: Digests of the published data the project's numbers were made from (``sha256sum`` format).
PINS = CONFIG_DIR / "data.sha256"


@lru_cache(maxsize=1)
def pins() -> dict[str, str]:
    lines = split_lines(PINS.read_text(encoding="utf-8")) if PINS.exists() else []
    return {rel.strip(): digest for digest, rel in (line.split(None, 1) for line in lines if line.strip())}


def data_variant(name: str, data_dir: str | Path | None) -> str:
    """``""`` when ``name``'s training files (train, dev, samples) match :data:`PINS` (unpinned files count
    as matching), else ``data-<8 hex>`` so a differing copy runs beside the published data, never over it.
    Test sets are left out: an edited one re-scores in place (docs/reproducing.md, "Data by content")."""
    specs = registry()
    if name not in specs:
        return ""
    base, digests = resolve_data_dir(data_dir), {}
    for spec in [specs[m] for m in specs[name].union] or [specs[name]]:
        for rel in {spec.train, spec.dev, *spec.samples.values()} - {None}:
            path = spec.path(rel, base)
            if path.is_file():
                digests[rel] = file_digest(path)
    if all(pins().get(rel, digest) == digest for rel, digest in digests.items()):
        return ""
    return "data-" + hashlib.sha256(repr(sorted(digests.items())).encode()).hexdigest()[:8]


def resolve_data_dir(data_dir: str | Path | None) -> Path:
    return Path(data_dir or os.environ.get("ACLM_DATA_DIR") or PROJECT_ROOT / "data")


def require_split(name: str, split: str) -> str:
    """The file of a split a run needs (``test``: runs are scored on it), or a clear DataError."""
    rel = getattr(get_spec(name), split)
    if rel is not None:
        return rel
    if name in registry():
        raise DataError(f"dataset {name!r} has no {split} split ({CONFIG_DIR / 'datasets.yaml'})")
    raise DataError(f"dataset folder {find_folder(name)} has no {split} file, and runs are evaluated on one: "
                    f"add {_expected(split)}")


def load_split(name: str, split: str, data_dir: str | Path | None = None) -> list[TaggedSentence] | None:
    """Sentences of one split, or None when the entry has none (a folder's dev is then carved out of
    train); a folder without a test file is an error."""
    spec = get_spec(name)
    if split == "test" and name not in registry():
        require_split(name, "test")
    rel = spec.samples.get(split) if isinstance(split, int) else getattr(spec, split)
    if rel is None:
        return None
    path = spec.path(rel, resolve_data_dir(str(data_dir) if data_dir else None))
    if path.exists():
        return read_conll(path, spec.format, spec.empty_token)
    raise FileNotFoundError(f"{path} not found for dataset {name!r} split {split!r}: {missing_hint(spec)}")


def missing_hint(spec: DatasetSpec) -> str:
    """What to do about a file of ``spec`` that is not in the data folder."""
    if spec.hf:
        return (f"fetch it from the Hugging Face hub ({spec.hf['path']}) with `python scripts/fetch_data.py "
                f"dataset={spec.name}`, or set data_dir (or ACLM_DATA_DIR) to the folder that holds it")
    where = f"; {spec.name} is not shipped: {spec.obtain}" if spec.obtain else ""
    return f"set data_dir (or ACLM_DATA_DIR) to the folder that holds it{where}"


#: The splits a hub dataset gives a registry entry, by the entry's name for them (``hf.splits`` may rename).
HUB_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def fetch_from_hub(name: str, data_dir: str | Path | None = None, force: bool = False) -> dict[str, int | None]:
    """Write the files entry ``name`` lacks from its ``hf`` coordinates: split -> sentences written (None: there)."""
    from aclm.base.data import write_conll

    spec = get_spec(name)
    if spec.union:
        return {f"{member} {split}": n for member in spec.union
                for split, n in fetch_from_hub(member, data_dir, force).items()}
    base = resolve_data_dir(str(data_dir) if data_dir else None)
    written: dict[str, int | None] = {}
    for split, default in HUB_SPLITS.items():
        rel = getattr(spec, split)
        if rel is None:
            continue
        path = spec.path(rel, base)
        if path.exists() and not (force and spec.hf):
            written[split] = None
            continue
        if not spec.hf:
            raise DataError(f"{path}: missing, and dataset {name!r} names no hub dataset to fetch it from (hf: in "
                            f"{CONFIG_DIR / 'datasets.yaml'}); {missing_hint(spec)}")
        sentences = load_from_hub(spec, (spec.hf.get("splits") or {}).get(split, default))
        write_conll(path, sentences)
        written[split] = len(sentences)
    return written


def load_from_hub(spec: DatasetSpec, hf_split: str) -> list[TaggedSentence]:
    """Load a split with ``datasets`` and map tag ids to names."""
    import datasets

    try:
        ds = datasets.load_dataset(spec.hf["path"], spec.hf.get("name"), split=hf_split)
    except ConnectionError as err:          # offline, or no answer: one line, not a traceback
        raise DataError(f"dataset {spec.name!r}: {err}; fetch it where the hub can be reached, or put its files "
                        f"in the data folder") from None
    names = spec.hf.get("tags") or getattr(ds.features["ner_tags"].feature, "names", None)
    if not names:
        raise DataError(f"dataset {spec.name!r}: {spec.hf['path']} on the hub gives its tags as ids without names; "
                        f"list the names in id order as hf.tags in {CONFIG_DIR / 'datasets.yaml'} (its dataset "
                        f"card gives them)")
    return [TaggedSentence(list(row["tokens"]), normalise_tags([names[i] for i in row["ner_tags"]]),
                           {"source": f"hf:{spec.hf['path']}:{hf_split}:{k}"})
            for k, row in enumerate(ds)]
