"""File-to-file stages that skip themselves when nothing they depend on changed.

A stage owns one output directory.  It is built in a scratch directory and
renamed into place together with ``_stage.json``, whose fingerprint covers the
stage's config sections and its inputs.  An input that is itself a stage
directory is represented by its ``_stage.json``, so re-running one stage
re-runs everything after it, and nothing before it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from aclm.config import config_hash, to_dict
from aclm.io import atomic_dir, read_json, sha256_path, write_json

STAMP = "_stage.json"
log = logging.getLogger("aclm.stages")


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
            for p in sorted(out_dir.rglob("*")) if p.is_file() and p.name != STAMP}


def is_current(out_dir: Path, config: Any, inputs: Sequence[Path]) -> bool:
    """The stamp matches the config and inputs, and every file it lists is there, whole."""
    stamp = Path(out_dir) / STAMP
    if not stamp.exists():
        return False
    info = read_json(stamp)
    return (info["fingerprint"] == fingerprint(config, inputs)
            and output_listing(Path(out_dir)) == info.get("outputs"))


def run_stage(name: str, out_dir: Path, config: Any, inputs: Sequence[Path],
              build: Callable[[Path], dict | None], force: bool = False) -> bool:
    """Run ``build(scratch_dir)`` unless ``out_dir`` is current; returns whether it ran.

    ``build`` writes its files into the scratch directory and may return a
    dict of facts (counts, timings) recorded in the stamp.
    """
    out_dir = Path(out_dir)
    inputs = [Path(p) for p in inputs]
    if not force and is_current(out_dir, config, inputs):
        log.info("%s: up to date (%s)", name, out_dir)
        return False
    log.info("%s: running -> %s", name, out_dir)
    start = time.perf_counter()
    with atomic_dir(out_dir) as scratch:
        facts = build(scratch) or {}
        write_json(scratch / STAMP, {
            "stage": name,
            "fingerprint": fingerprint(config, inputs),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - start, 3),
            "inputs": [str(p) for p in inputs],
            "config": to_dict(config),
            "facts": facts,
            "outputs": output_listing(scratch),
        })
    log.info("%s: done in %.1f s", name, time.perf_counter() - start)
    return True
