"""File-to-file stages that skip themselves when nothing they depend on changed.

A stage owns one output directory.  It is built in a scratch directory and
renamed into place together with ``_stage.json``, whose fingerprint covers the
stage's config and its inputs.

* **Config, by construction.**  A stage declares the config keys it reads
  (``keys``); its code receives a view of the config holding those keys
  only (reading any other key raises), and the fingerprint hashes exactly
  that view.  Where files live (``data_dir``, ``run_dir``) and the device are
  in every view and in no fingerprint: inputs are hashed by content instead.
  So is ``tensorboard``: its event files (:mod:`aclm.base.tensorboard`) are
  in no stage's listing either.
* **Inputs, by content.**  A file or folder is hashed by its bytes; an input
  that is itself a stage directory by its ``_stage.json``, so re-running one
  stage re-runs everything after it, and nothing before it.  Inputs are named
  relative to the setting folder (or the data folder), so a copied or moved
  run folder stays current.
* **Code, by its source.**  The project modules the stage's builder uses, at
  any depth (:func:`aclm.run.provenance.code_digests`), and a ``version`` a
  developer bumps for a change the source cannot show (a library upgrade
  that changes outputs).  Editing ``steps/templates.py`` re-runs S3 and what
  follows; S1 and S2 stay current.

A stage that runs says why (new, forced, which config keys, inputs or code
changed).  Its stamp records the checkout it ran from (commit, uncommitted
changes, package path, library versions).  A stage every method of a setting
shares is checked and built under the setting's lock (:mod:`aclm.run.locks`).

**Pruning.**  A finished stage's model weights can be deleted once what
reads them is written (:func:`prune`, recorded in ``_pruned.json``): the
stage stays current, so nothing re-runs for it.  A stage that declares it
``loads`` an upstream stage's files and must run finds them pruned and raises
:class:`Pruned`; the chain rebuilds that upstream stage first.

``planning()`` turns running into checking: inside it, the first stage that
is not current raises :class:`Stale` instead of building, which is how a grid
tells a finished run from one whose config or inputs changed.
"""

from __future__ import annotations

import errno
import functools
import logging
import shutil
import time
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base import tensorboard
from aclm.base.config import config_hash, flatten, hub_revision, is_hub_id, model_path, to_dict
from aclm.base.datasets import resolve_data_dir
from aclm.base.io import atomic_dir, read_json, sha256_path, write_json
from aclm.base.runtime import PeakMemory, RunError, check_interrupted
from aclm.run import gpu_share, layout
from aclm.run.layout import RunLayout
from aclm.run.locks import folder_lock
from aclm.run.provenance import checkout, code_digests, edited_while_running

STAMP = "_stage.json"
PRUNED = "_pruned.json"
#: Files :func:`prune` deletes: model weights (flair's ``best-model.pt``, HF's weight files).
WEIGHT_PATTERNS = ("best-model.pt", "*.safetensors", "pytorch_model*.bin")
#: In every stage's view of the config, never in its fingerprint: where things are and what watches them,
#: not what they are.
ENVIRONMENT = ("data_dir", "run_dir", "device", "tensorboard")
log = logging.getLogger("aclm.run.stages")
_planning: ContextVar[bool] = ContextVar("planning", default=False)


class Stale(Exception):
    """Raised in ``planning()`` by the first stage whose outputs are not current, with why."""

    def __init__(self, stage_name: str, reason: str) -> None:
        super().__init__(f"{stage_name} is not current ({reason})")
        self.stage_name, self.reason = stage_name, reason


class NoSpace(OSError):
    """The disk filled while a stage wrote: said plainly, whatever the library's own error was."""

    def __init__(self, stage_name: str, folder: Path) -> None:
        super().__init__(errno.ENOSPC, f"no space left on device: {stage_name} could not write {folder} "
                                       f"(free some space there, or point run_dir= elsewhere)")


class CodeEdited(RunError):
    """Project code a stage ran changed on disk while it ran: its output is not stamped."""

    def __init__(self, stage_name: str, files: Sequence[str]) -> None:
        super().__init__(f"{stage_name}: {', '.join(files)} changed on disk while this process ran it; the "
                         f"stage's output was made by the code as it was when loaded, which no stamp can name, so "
                         f"it is not kept: run again")


class Pruned(Exception):
    """A stage that must run needs files of an upstream stage that were pruned."""

    def __init__(self, stage_dir: Path) -> None:
        super().__init__(f"{stage_dir} was pruned (its model weights deleted) and is needed again")
        self.stage_dir = Path(stage_dir)


@contextmanager
def planning() -> Iterator[None]:
    token = _planning.set(True)
    try:
        yield
    finally:
        _planning.reset(token)


def in_planning() -> bool:
    """Whether stages are only being checked (:func:`planning`), not run."""
    return _planning.get()


def view(cfg: DictConfig, keys: Sequence[str]) -> DictConfig:
    """A read-only config holding only ``keys`` (dotted paths) and ``ENVIRONMENT``."""
    out = OmegaConf.create({})
    for key in (*keys, *ENVIRONMENT):
        value = to_dict(OmegaConf.select(cfg, key, throw_on_missing=True))   # interpolations resolved
        OmegaConf.update(out, key, value, force_add=True)
    OmegaConf.set_struct(out, True)
    OmegaConf.set_readonly(out, True)
    return out


def hashed(config: DictConfig) -> dict:
    """What a stage's fingerprint covers: its view without ``ENVIRONMENT``."""
    return {k: v for k, v in to_dict(config).items() if k not in ENVIRONMENT}


def input_digest(path: Path) -> str:
    stamp = path / STAMP
    return sha256_path(stamp if stamp.exists() else path)


def input_name(path: Path, roots: Sequence[Path]) -> str:
    """How the stamp names an input: relative to the first of ``roots`` holding it, else its full path."""
    for root in roots:
        try:
            return str(Path(path).resolve().relative_to(Path(root).resolve()))
        except ValueError:
            continue
    return str(path)


def identity(config: Any, inputs: Sequence[Path], roots: Sequence[Path] = (), code: Mapping[str, str] | None = None,
             version: int = 1, reads: Mapping[str, Any] | None = None) -> dict:
    """Everything a stage's outputs depend on: its config view, its inputs' contents, its code and version, and
    what it reads that none of those show (``reads``: model folders, how a dataset's files are read)."""
    missing = [str(p) for p in inputs if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"stage inputs missing: {missing}")
    return {"config": to_dict(config), "inputs": {input_name(p, roots): input_digest(Path(p)) for p in inputs},
            "code": dict(code or {}), "version": version, **({"reads": dict(reads)} if reads else {})}


def model_folders(config: Mapping[str, Any]) -> dict[str, dict]:
    """The models a stage's config names (``ner.model``, ``generation.mixner.embedder``, ...).

    A local folder is each file's size and modification time, through symlinks, so weights rebuilt or re-pointed
    under an unchanged name are a change (a folder moved or copied with its times kept is not).  A hub name is the
    commit of its snapshot in the local Hugging Face cache, so a newer download of the same name is a change.
    """
    found = {}
    for key, value in flatten(dict(config)).items():
        last = key.rpartition(".")[2]
        if isinstance(value, str) and (last in ("model", "embedder") or last.endswith("_model")):
            folder = Path(model_path(value)).resolve()
            if folder.is_dir():
                found[f"model {key}"] = {str(p.relative_to(folder)): [p.stat().st_size, p.stat().st_mtime_ns]
                                         for p in sorted(folder.rglob("*")) if p.is_file()}
            elif is_hub_id(value):
                found[f"model {key}"] = {HUB_REVISION: hub_revision(value)}
    return found


#: How :func:`model_folders` records a hub model: the commit of its cached snapshot (None: not downloaded yet).
HUB_REVISION = "hub revision"


def with_downloads(name: str, now: dict) -> dict:
    """Identity ``now`` with the revision of each hub model its build downloaded: one not in the cache before
    the build is stamped as the snapshot the build read, so the next run finds the stage current.  One whose
    cached revision changed while the stage ran (a newer download) leaves no telling which the build read:
    :class:`ModelChanged`."""
    reads = now.get("reads", {})
    hub = [key for key, value in reads.items() if isinstance(value, dict) and set(value) == {HUB_REVISION}]
    if not hub:
        return now
    after = model_folders(now["config"])
    changed = [key for key in hub if reads[key][HUB_REVISION] is not None and after.get(key) != reads[key]]
    if changed:
        raise ModelChanged(name, changed)
    return {**now, "reads": {**reads, **{key: after.get(key, reads[key]) for key in hub}}}


class ModelChanged(RunError):
    """A hub model a stage read was downloaded anew while it ran: its output is not stamped."""

    def __init__(self, stage_name: str, keys: Sequence[str]) -> None:
        super().__init__(f"{stage_name}: a newer revision of {', '.join(keys)} reached the Hugging Face cache while "
                         f"the stage ran, so which one it read is unknown and its output is not kept: run again")


def _changed(old: Mapping, new: Mapping) -> list[str]:
    return sorted(k for k in {*old, *new} if old.get(k) != new.get(k))


def why_stale(out_dir: Path, now: dict) -> str | None:
    """Why ``out_dir`` must be built for identity ``now`` (None: it is current)."""
    if not (Path(out_dir) / STAMP).exists():
        return "new"
    info = stamp(out_dir)
    before = info.get("identity")
    if before is None:
        return "stamped by an older version of the project"
    reasons = []
    keys = _changed(flatten(before["config"]), flatten(now["config"]))
    if keys:
        reasons.append("config changed: " + ", ".join(keys))
    if before["version"] != now["version"]:
        reasons.append(f"stage version {before['version']} -> {now['version']}")
    code = _changed(before["code"], now["code"])
    if code:
        reasons.append("code changed: " + ", ".join(code))
    inputs = _changed(before["inputs"], now["inputs"])
    if inputs:
        reasons.append("input changed: " + ", ".join(inputs))
    reads = _changed(before.get("reads", {}), now.get("reads", {}))
    if reads:
        reasons.append("changed: " + ", ".join(reads))
    if not reasons and info["fingerprint"] != config_hash(now):
        reasons.append("fingerprint changed")
    if not reasons and {**output_listing(Path(out_dir)), **pruned_files(out_dir)} != info.get("outputs"):
        reasons.append("its files were changed or deleted")
    return "; ".join(reasons) or None


def output_listing(out_dir: Path) -> dict[str, int]:
    """Every file a stage wrote, with its size, so a later deletion or truncation is noticed."""
    return {str(p.relative_to(out_dir)): p.stat().st_size for p in sorted(out_dir.rglob("*"))
            if p.is_file() and p.name not in (STAMP, PRUNED) and p.relative_to(out_dir).parts[0] != tensorboard.FOLDER}


def stamp(out_dir: Path) -> dict:
    """A finished stage's ``_stage.json``: fingerprint, time, memory, inputs, config, facts and outputs."""
    return read_json(Path(out_dir) / STAMP)


def chain_code(scores: Path) -> dict[str, dict[str, str]]:
    """The code digests each stage of a scoring stage's chain recorded (its own stamp and its inputs'), by stage
    folder: what made the result, to hold against the code now (:func:`aclm.run.provenance.changed_code`)."""
    scores, own = Path(scores), stamp(scores)
    root = scores.parent if scores.name == layout.S1_EVAL else scores.parent.parent    # the setting's folder
    inputs = [root / name for name in own["identity"]["inputs"]]
    return {str(scores): own["identity"].get("code", {}),
            **{str(folder): stamp(folder)["identity"].get("code", {}) for folder in inputs
               if (folder / STAMP).is_file()}}


def facts(out_dir: Path) -> dict:
    """The facts a finished stage's build returned (counts, types, timings), as its stamp keeps them."""
    return stamp(out_dir)["facts"]


def pruned_files(out_dir: Path) -> dict[str, int]:
    """The files :func:`prune` deleted from a stage directory, with their sizes (empty if none)."""
    path = Path(out_dir) / PRUNED
    return read_json(path) if path.exists() else {}


def prune(out_dir: Path, patterns: Sequence[str] = WEIGHT_PATTERNS) -> int:
    """Delete a finished stage's files matching ``patterns``; returns the bytes freed.

    The stamp is left as it is (stages downstream hash it: they stay current);
    ``_pruned.json`` records what went, so the stage still counts as current.
    Inside ``planning()`` nothing is deleted.
    """
    out_dir = Path(out_dir)
    if _planning.get():
        return 0
    if not (out_dir / STAMP).exists():
        raise FileNotFoundError(f"{out_dir} is not a finished stage")
    sizes = {str(p.relative_to(out_dir)): p.stat().st_size
             for pattern in patterns for p in out_dir.rglob(pattern) if p.is_file()}
    if sizes:
        write_json(out_dir / PRUNED, {**pruned_files(out_dir), **sizes})
        for name in sizes:
            (out_dir / name).unlink()
        log.info("pruned %s: %.1f MB of model weights", out_dir, sum(sizes.values()) / 1e6)
    return sum(sizes.values())


def run_stage(name: str, out_dir: Path, config: Any, inputs: Sequence[Path],
              build: Callable[[Path], dict | None], force: bool = False, loads: Sequence[Path] = (),
              roots: Sequence[Path] = (), code: Mapping[str, str] | None = None, version: int = 1,
              reads: Mapping[str, Any] | None = None) -> bool:
    """Run ``build(scratch_dir)`` unless ``out_dir`` is current; returns whether it ran.

    ``build`` writes its files into the scratch directory and may return a
    dict of facts (counts, timings) recorded in the stamp.  ``loads`` are the
    input stage directories whose files it opens: if one was pruned,
    :class:`Pruned` is raised before anything runs.  ``roots`` name the
    inputs in the stamp; ``code`` and ``version`` are the stage's code identity; ``reads`` what else its
    output depends on (:func:`identity`).
    """
    out_dir = Path(out_dir)
    inputs = [Path(p) for p in inputs]
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        if _planning.get():
            raise Stale(name, f"inputs missing: {missing}")
        raise FileNotFoundError(f"{name}: stage inputs missing: {missing}")
    now = identity(config, inputs, roots, code, version, reads)
    reason = "forced" if force else why_stale(out_dir, now)
    if reason is None:
        log.info("%s: up to date (%s)", name, out_dir)
        return False
    if _planning.get():
        raise Stale(name, reason)
    for path in loads:
        if pruned_files(path):
            raise Pruned(path)
    log.info("%s: running (%s) -> %s", name, reason, out_dir)
    with gpu_share.lease(name):
        return _build_and_stamp(name, out_dir, now, reason, config, build)


def _build_and_stamp(name: str, out_dir: Path, now: dict, reason: str, config: Any,
                     build: Callable[[Path], dict | None]) -> bool:
    """Build the stage in a scratch folder and stamp it; the folder replaces ``out_dir`` when both are done."""
    start = time.perf_counter()
    with atomic_dir(out_dir) as scratch:
        with PeakMemory() as memory:
            try:
                facts = build(scratch) or {}
            except Exception as err:
                if _disk_full(err, out_dir.parent):
                    raise NoSpace(name, out_dir) from err
                raise
        check_interrupted()           # a signal a library swallowed while the stage ran: never stamp it
        edited = edited_while_running(now["code"])
        if edited:
            raise CodeEdited(name, edited)
        now = with_downloads(name, now)
        write_json(scratch / STAMP, {
            "stage": name,
            "fingerprint": config_hash(now),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - start, 3),
            "memory": {**memory.facts(), **gpu_share.reserved_peak()},
            "inputs": list(now["inputs"]),
            "config": to_dict(config),
            "identity": now,
            "reason": reason,
            "checkout": checkout(),
            "facts": facts,
            "outputs": output_listing(scratch),
        })
    log.info("%s: done in %.1f s", name, time.perf_counter() - start)
    return True


#: Free bytes below which a failed write is taken for a full disk (torch says only "iostream error").
_NEARLY_FULL = 16 * 2**20


def _disk_full(err: BaseException, folder: Path) -> bool:
    chain: BaseException | None = err
    while chain is not None:
        if isinstance(chain, OSError) and chain.errno == errno.ENOSPC:
            return True
        chain = chain.__cause__ or chain.__context__
    try:
        return shutil.disk_usage(folder).free < _NEARLY_FULL
    except OSError:
        return False


def _directories(value) -> list:
    """The directories an upstream argument holds: one, a list of them, or a mapping's values."""
    if isinstance(value, Mapping):
        return list(value.values())
    return list(value) if isinstance(value, (list, tuple)) else [value]


#: The stages every method of a setting shares: built under the setting's lock.
SHARED = (layout.DATA, layout.S1, layout.S1_EVAL)


def stage(name: str, keys: Sequence[str] = (), files: Callable[[DictConfig], list[Path]] | None = None,
          loads: Sequence[str] = (), code: Sequence[str] = (), version: int = 1,
          reads: Callable[[DictConfig], dict] | None = None):
    """Declare a stage: ``@stage("s2_keywords", keys=("keywords", "seed"))`` over ``build(c, out, **upstream)``.

    The decorated function is called as ``fn(cfg, force=False, **upstream)``, each
    upstream directory under the name of ``build``'s argument for it (a chain
    names them after the stages they come from: ``s3_templates=...``), and
    returns its output directory.  ``build`` gets the view ``c`` of the keys it
    declares (``keys``), the scratch directory and the upstream directories by name;
    ``files(c)`` names raw input files (data, test sets) hashed with them;
    ``loads`` names the upstream stages whose models it opens (see :func:`prune`);
    ``code`` names project modules it reaches only by name (the fingerprint
    covers them with the code ``build`` uses); ``version`` is bumped by hand
    for a change of output the code cannot show; ``reads(c)`` says what else the
    output depends on (how a dataset's files are read).  The models the keys
    name are part of the fingerprint: a local folder's files, a hub model's
    cached revision (:func:`model_folders`).
    An upstream value may also be a list of directories (a baseline's ``needs``)
    or a mapping of them (the scoring stages' ``chain``), passed on as given.
    """
    def wrap(build: Callable[..., dict | None]) -> Callable[..., Path]:
        def logged_build(c: DictConfig, tmp: Path, **upstream) -> dict | None:
            with tensorboard.logging_into(tmp / tensorboard.FOLDER, c.tensorboard):
                return build(c, tmp, **upstream)

        @functools.wraps(build)
        def run(cfg: DictConfig, force: bool = False, **upstream) -> Path:
            c = view(cfg, keys)
            here = RunLayout.of(cfg)
            out = here.stage(name)
            dirs = [Path(d) for value in upstream.values() for d in _directories(value)]
            inputs = [*dirs, *(files(c) if files else [])]
            shared = name in SHARED and not _planning.get()
            with folder_lock(here.root, "setting", here.root, wait=True) if shared else nullcontext():
                run_stage(name, out, hashed(c), inputs, lambda tmp: logged_build(c, tmp, **upstream), force=force,
                          loads=[d for d in dirs if Path(d).name in loads],
                          roots=[here.root, resolve_data_dir(c.data_dir)], code=code_digests(build, code),
                          version=version, reads={**model_folders(hashed(c)), **(reads(c) if reads else {})})
            return out

        run.config_keys = tuple(keys)
        return run

    return wrap
