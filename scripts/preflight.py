#!/usr/bin/env python
"""The first command to run on a GPU machine: the profile's real models checked, then one small ACLM run.

    make preflight [PROFILE=paper] [DATASET=multiconer/zh] [ARGS="device=cuda"]
    python scripts/preflight.py profile=paper dataset=multiconer/zh

1. data: the run's data check, with the share of S4's targets and S5's outputs each length limit cuts;
2. models: each model an ACLM run loads, with its hub revision (or folder); the tagger's tokenizer class
   and length limit; the generator's language codes framing source and target, its label tokens single,
   and the generation-config keys S5 leaves to the checkpoint (aclm/run/modelcheck.py);
3. a run: S0-S7 of the setting on 16 gold and 16 dev sentences, one epoch each, in runs/preflight/
   (started afresh each time); per stage its seconds, CUDA peak and, for S5, the share of well-formed
   generations.

Its budget is 10 minutes on one GPU: the time taken is printed, and flagged when over.  Exits 1 naming
the first problem.  Network is allowed: a model not in the cache is downloaded.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

from aclm.base.logs import setup_logging
from aclm.engine import stamp
from aclm.run.chain import run_method
from aclm.run.cli import main_guard
from aclm.run.datacheck import check_setting
from aclm.run.modelcheck import Findings, check_models
from aclm.run.naming import run_config
from aclm.stages import layout
from aclm.stages.data import data_splits
from aclm.stages.layout import RunLayout
from aclm.steps.screening import MALFORMED

#: The small run: ACLM on 16 gold sentences and 16 dev, one epoch per trained model.
SMALL = ("method=aclm", "gold=16", "splits.dev_size=16", "ner.epochs=1", "generator.epochs=1",
         "run_dir=runs/preflight")
#: What the preflight should take on one GPU at paper size.
BUDGET_SECONDS = 600


def well_formed(counts: dict) -> str:
    """The share of S5's generations that parsed (kept, repeats and copies alike)."""
    malformed = sum(n for key, n in counts.items() if key.startswith(MALFORMED))
    return f"{1 - malformed / counts['generated']:.0%} of {counts['generated']}" if counts.get("generated") else "-"


def small_run(cfg) -> tuple[list[str], list[str]]:
    """S0-S7 afresh; one line per stage, and the problem that stopped it if one did."""
    shutil.rmtree(RunLayout.of(cfg).root, ignore_errors=True)
    try:
        done = run_method(cfg)
    except Exception as err:            # noqa: BLE001 - whatever stops a stage is what the preflight reports
        return [], [f"the small run failed: {type(err).__name__}: {err}"]
    lines = [f"{'stage':<16}{'seconds':>9}{'CUDA peak MB':>14}  well-formed generations"]
    for name, path in done.items():
        record = stamp(path)
        cuda = record.get("memory", {}).get("cuda_peak_mb")
        lines.append(f"{name:<16}{record['seconds']:9.1f}{'-' if cuda is None else f'{cuda:.0f}':>14}  "
                     f"{well_formed(record['facts']) if name == layout.S5 else ''}".rstrip())
    return lines, []


def show(found: Findings) -> None:
    print("\n".join(found.lines + [f"problem: {p}" for p in found.problems]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="the profile, dataset and any config key")
    args = parser.parse_args()
    setup_logging()
    cfg = run_config([*SMALL, *args.overrides])
    print(f"preflight: profile {cfg.profile}, {cfg.dataset}, device {cfg.device}")
    start = time.perf_counter()
    report = check_setting(cfg)
    found = Findings(report.lengths + [f"warning: {w}" for w in report.warnings], report.errors)
    if not found.problems:
        train, _ = data_splits(cfg)
        found.add(check_models(cfg, sorted({s.meta["language"] for s in train if s.meta.get("language")}), train))
    show(found)
    if not found.problems:
        ran = Findings(*small_run(cfg))
        show(ran)
        found.add(ran)
    took = time.perf_counter() - start
    print(f"preflight took {took:.0f} s" + (f", over its {BUDGET_SECONDS} s budget" if took > BUDGET_SECONDS else ""))
    if found.problems:
        sys.exit(f"preflight failed: {found.problems[0]}" +
                 (f" (and {len(found.problems) - 1} more above)" if len(found.problems) > 1 else ""))
    print("preflight passed")


if __name__ == "__main__":
    main_guard(main)
