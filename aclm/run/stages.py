"""File-to-file stages that skip themselves when nothing they depend on changed.

A stage owns one output directory.  It is built in a scratch directory and
renamed into place together with ``_stage.json``, whose fingerprint covers the
stage's config and its inputs.

* **Config, by construction.**  A stage declares the config keys it reads
  (``reads``); its code receives a view of the config holding those keys
  only (reading any other key raises), and the fingerprint hashes exactly
  that view.  Where files live (``data_dir``, ``run_dir``) and the device are
  in every view and in no fingerprint: inputs are hashed by content instead.
* **Inputs, by content.**  A file or folder is hashed by its bytes; an input
  that is itself a stage directory by its ``_stage.json``, so re-running one
  stage re-runs everything after it, and nothing before it.

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

import functools
import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base.config import config_hash, to_dict
from aclm.base.io import atomic_dir, read_json, sha256_path, write_json
from aclm.base.runtime import PeakMemory
from aclm.run.layout import RunLayout

STAMP = "_stage.json"
PRUNED = "_pruned.json"
#: Files :func:`prune` deletes: model weights (flair's ``best-model.pt``, HF's weight files).
WEIGHT_PATTERNS = ("best-model.pt", "*.safetensors", "pytorch_model*.bin")
#: In every stage's view of the config, never in its fingerprint: where things are, not what they are.
ENVIRONMENT = ("data_dir", "run_dir", "device")
log = logging.getLogger("aclm.run.stages")
_planning: ContextVar[bool] = ContextVar("planning", default=False)


class Stale(Exception):
    """Raised in ``planning()`` by the first stage whose outputs are not current."""


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


def fingerprint(config: Any, inputs: Sequence[Path]) -> str:
    missing = [str(p) for p in inputs if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"stage inputs missing: {missing}")
    return config_hash(config, {str(p): input_digest(Path(p)) for p in inputs})


def output_listing(out_dir: Path) -> dict[str, int]:
    """Every file a stage wrote, with its size, so a later deletion or truncation is noticed."""
    return {str(p.relative_to(out_dir)): p.stat().st_size
            for p in sorted(out_dir.rglob("*")) if p.is_file() and p.name not in (STAMP, PRUNED)}


def stamp(out_dir: Path) -> dict:
    """A finished stage's ``_stage.json``: fingerprint, time, memory, inputs, config, facts and outputs."""
    return read_json(Path(out_dir) / STAMP)


def facts(out_dir: Path) -> dict:
    """The facts a finished stage's build returned (counts, types, timings), as its stamp keeps them."""
    return stamp(out_dir)["facts"]


def pruned_files(out_dir: Path) -> dict[str, int]:
    """The files :func:`prune` deleted from a stage directory, with their sizes (empty if none)."""
    path = Path(out_dir) / PRUNED
    return read_json(path) if path.exists() else {}


def is_current(out_dir: Path, config: Any, inputs: Sequence[Path]) -> bool:
    """The stamp matches the config and inputs, and every file it lists is there, whole, or was pruned."""
    if not (Path(out_dir) / STAMP).exists():
        return False
    info = stamp(out_dir)
    return (info["fingerprint"] == fingerprint(config, inputs)
            and {**output_listing(Path(out_dir)), **pruned_files(out_dir)} == info.get("outputs"))


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
              build: Callable[[Path], dict | None], force: bool = False, loads: Sequence[Path] = ()) -> bool:
    """Run ``build(scratch_dir)`` unless ``out_dir`` is current; returns whether it ran.

    ``build`` writes its files into the scratch directory and may return a
    dict of facts (counts, timings) recorded in the stamp.  ``loads`` are the
    input stage directories whose files it opens: if one was pruned,
    :class:`Pruned` is raised before anything runs.
    """
    out_dir = Path(out_dir)
    inputs = [Path(p) for p in inputs]
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise (Stale if _planning.get() else FileNotFoundError)(f"{name}: stage inputs missing: {missing}")
    if not force and is_current(out_dir, config, inputs):
        log.info("%s: up to date (%s)", name, out_dir)
        return False
    if _planning.get():
        raise Stale(f"{name} is not current: {out_dir}")
    for path in loads:
        if pruned_files(path):
            raise Pruned(path)
    log.info("%s: running -> %s", name, out_dir)
    start = time.perf_counter()
    with atomic_dir(out_dir) as scratch:
        with PeakMemory() as memory:
            facts = build(scratch) or {}
        write_json(scratch / STAMP, {
            "stage": name,
            "fingerprint": fingerprint(config, inputs),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - start, 3),
            "memory": memory.facts(),
            "inputs": [str(p) for p in inputs],
            "config": to_dict(config),
            "facts": facts,
            "outputs": output_listing(scratch),
        })
    log.info("%s: done in %.1f s", name, time.perf_counter() - start)
    return True


def stage(name: str, reads: Sequence[str] = (), files: Callable[[DictConfig], list[Path]] | None = None,
          loads: Sequence[str] = ()):
    """Declare a stage: ``@stage("s2_keywords", reads=("keywords", "seed"))`` over ``build(c, out, *upstream)``.

    The decorated function is called as ``fn(cfg, *upstream_dirs, force=False)``
    and returns its output directory.  ``build`` gets the view ``c`` of the
    keys it ``reads``, the scratch directory and the upstream directories;
    ``files(c)`` names raw input files (data, test sets) hashed with them;
    ``loads`` names the upstream stages whose models it opens (see :func:`prune`).
    A stage may also take its upstream directories by name, as a mapping
    (``fn(cfg, chain={"data": ..., "s1_ner": ...})``: the scoring stages), passed on to ``build`` as given.
    """
    def wrap(build: Callable[..., dict | None]) -> Callable[..., Path]:
        @functools.wraps(build)
        def run(cfg: DictConfig, *upstream: Path, force: bool = False, **named: Mapping[str, Path]) -> Path:
            c = view(cfg, reads)
            out = RunLayout.of(cfg).stage(name)
            dirs = [*upstream, *(d for mapping in named.values() for d in mapping.values())]
            inputs = [*dirs, *(files(c) if files else [])]
            run_stage(name, out, hashed(c), inputs, lambda tmp: build(c, tmp, *upstream, **named), force=force,
                      loads=[d for d in dirs if Path(d).name in loads])
            return out

        return run

    return wrap
