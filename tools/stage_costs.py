#!/usr/bin/env python
"""What one ACLM setting costs, stage by stage, and what the paper's Table 1 would.

    make bench-paper-shape                # the paper-size stand-ins on this machine (builds them first)
    python tools/stage_costs.py profile=paper_shape device=cuda generator.epochs=10 ner.epochs=100
    python tools/stage_costs.py --fresh --json costs.json profile=mini

Runs (or reuses) one ACLM setting (default profile paper_shape: random weights at the paper's sizes, one
epoch per training stage) and prints per stage the wall time, time per unit, peak memory (RSS; CUDA's
on a GPU) and bytes written and kept; then scales it to the paper's epochs and to all of Table 1
(configs/grids/table1.yaml), printing the assumptions. Details and results: docs/cost.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools is no installed package: the checkout's

import torch

from aclm.base import registry
from aclm.base.config import load_config
from aclm.base.io import write_json
from aclm.base.logs import setup_logging
from aclm.engine import stamp
from aclm.engine.stages import folder_bytes
from aclm.experiments.grid import PRUNING, expand, load_grid
from aclm.run.chain import run_method
from aclm.run.cli import main_guard
from aclm.run.naming import run_config
from aclm.stages import layout, outputs
from aclm.stages.outputs import facts
from aclm.stages.scores import test_names
from tools.gpu_check import later_epochs_mean
from tools.gpu_measure import clocked

A100_BF16_FLOPS = 312e12           # dense bf16 peak of the paper's GPU (NVIDIA A100)
#: sentences in one official MultiCoNER v1 test set, the smallest and the largest language's (configs/datasets.yaml)
OFFICIAL_TEST_SENTENCES = (130_000, 220_000)


def matmul_flops(device: str, n: int = 2048, repeats: int = 5) -> float:
    """This device's dense float32 matmul throughput (FLOP/s), the yardstick of the GPU estimate."""
    a = torch.randn(n, n, device=device)
    torch.mm(a, a)
    with clocked(torch.device(device)) as took:
        for _ in range(repeats):
            torch.mm(a, a)
    return 2 * n ** 3 * repeats / took["seconds"]


def tagger_parts(epochs_to: int, seconds: float, training: dict) -> Optional[dict[str, float]]:
    """A tagger stage's seconds at ``epochs_to`` epochs from its measured ones: ``once`` (loading, final save,
    the first epoch's warm-up), ``train`` (grows with the training set), ``dev`` (does not). None under 2 epochs."""
    epochs = training.get("epoch_seconds") or []
    if len(epochs) < 2:
        return None
    spent = [e["train"] + e["dev"] + e.get("save", 0.0) for e in epochs]
    mean = later_epochs_mean(epochs)
    train, rest = mean["train"], mean["dev"] + mean["save"]
    return {"once": seconds - sum(spent) + max(spent[0] - train - rest, 0.0), "train": epochs_to * train,
            "dev": epochs_to * rest}


def stage_rows(cfg, done: dict[str, Path], train: int, dev: int) -> list[dict]:
    """One row per stage: its cost here and scaled to the paper's settings (``train`` and ``dev``: the run's
    sentence counts). A tagger scales from its recorded epochs (:func:`tagger_parts`), else from the evaluation
    stage's scoring rate."""
    paper = load_config(["profile=paper", f"dataset={cfg.dataset}"])
    scores = list(done.values())[-1]
    tests = [n for k, n in outputs.result(scores)["sizes"].items() if k.startswith("test:")]
    tested = sum(tests)
    per_scored = stamp(scores)["seconds"] / tested        # seconds per sentence the tagger scores, loading included
    s1_epochs = facts(done[layout.S1]).get("training", {}).get("epoch_seconds") or []
    rate = later_epochs_mean(s1_epochs)["dev"] / dev if len(s1_epochs) > 1 else per_scored   # without loading
    rows = []
    for name, path in done.items():
        record = stamp(path)
        built, seconds = record["facts"], record["seconds"]
        row = {"stage": name, "seconds": seconds, **record.get("memory", {}), "bytes_written": record["bytes"],
               "bytes_kept": folder_bytes(path)}
        if name in (layout.S1, layout.S7):
            epochs, dev_pass = cfg.ner.epochs, dev * per_scored
            training = max(seconds - (epochs + 1) * dev_pass, 0.0) / epochs
            # the paper's S7 trains on gold + up to R x gold generations (all kept: an upper bound)
            grow = (1 + paper.generation.rounds) * train / built["train"] if name == layout.S7 else 1.0
            parts = tagger_parts(paper.ner.epochs, seconds, built.get("training", {})) or {
                "once": dev_pass, "train": paper.ner.epochs * training, "dev": paper.ner.epochs * dev_pass}
            row.update(unit="epoch", per_unit=seconds / epochs, paper_parts=parts, grow=grow,
                       paper_seconds=parts["once"] + parts["train"] * grow + parts["dev"])
        elif name == layout.S4:
            row.update(unit="epoch", per_unit=seconds / cfg.generator.epochs,
                       paper_seconds=seconds / cfg.generator.epochs * paper.generator.epochs)
        elif name == layout.S5:
            row.update(unit="1k templates", per_unit=seconds / built["generated"] * 1000,
                       paper_seconds=seconds / built["generated"] * paper.generation.rounds * train)
        elif name in (layout.S1_EVAL, layout.S7_EVAL):
            row.update(unit="1k test sent.", per_unit=per_scored * 1000, paper_seconds=seconds, scored=tested,
                       test_sets=len(tests), score_rate=rate, score_once=max(seconds - tested * rate, 0.0))
        else:
            n = train + dev if name == layout.S2 else train
            row.update(unit="1k sentences", per_unit=seconds / n * 1000, paper_seconds=seconds)
        rows.append(row)
    return rows


def table1_estimate(rows: list[dict], gold: int, dev: int) -> dict:
    """Table 1's device time per method from one ACLM setting, ``low`` (S7 on gold alone) to ``high`` (gold +
    R x gold, all kept); what scales with gold size: docs/cost.md (S4's fixed dev loss too: overcounted).
    Baselines: S6 + S7 + an assumed share of S4 + S5. ``official_test_sets``: what the official test sets add.
    """
    cost = {r["stage"]: r for r in rows}
    paper = {name: r["paper_seconds"] for name, r in cost.items()}
    score = cost.get(layout.S7_EVAL) or cost[layout.S1_EVAL]
    per_set = score["scored"] / score["test_sets"]

    def tagger(stage: str, scale: float, grown: bool) -> float:
        parts = cost[stage]["paper_parts"]
        return parts["once"] + parts["dev"] + parts["train"] * scale * (cost[stage]["grow"] if grown else 1.0)

    grid = load_grid("table1")
    optional = sorted({m for block in grid.blocks for m in block.optional if registry.get(m).tagger == "flair"})
    methods, scorings = {}, 0
    for cell in [*expand(grid, "paper"), *expand(grid, "paper", methods=",".join(optional))]:
        scale, sets = cell.gold / gold, scored_test_sets(cell.dataset, cell.overrides)
        scorings += sets if cell.method not in optional else 0
        scoring = score["score_once"] + score["score_rate"] * per_set * sets
        if cell.method == layout.GOLD_ONLY:
            low = high = tagger(layout.S1, scale, grown=False) + scoring
        elif registry.get(cell.method).generation == "none":      # Gold-only tuned: S1's training once a rate
            rates = len(load_config(["profile=paper", f"method={cell.method}"]).tuning.learning_rates)
            low = high = tagger(layout.S1, scale, grown=False) * max(1, rates) + scoring
        else:
            generation = paper[layout.S4] + paper[layout.S5]
            method = registry.get(cell.method)
            own = (paper[layout.S2] * (cell.gold + dev) / (gold + dev) + (paper[layout.S3] + generation) * scale
                   if method.generation == "aclm" else method.generation_cost * generation * scale)
            rest = own + paper[layout.S6] * scale + scoring
            low, high = rest + tagger(layout.S7, scale, False), rest + tagger(layout.S7, scale, True)
        sums = methods.setdefault(cell.method, {"runs": 0, "low": 0.0, "high": 0.0})
        sums["runs"], sums["low"], sums["high"] = sums["runs"] + 1, sums["low"] + low, sums["high"] + high
    table = {m: v for m, v in methods.items() if m not in optional}
    return {"runs": {m: v["runs"] for m, v in table.items()}, "methods": table,
            "optional": {m: v for m, v in methods.items() if m in optional},
            "low": sum(v["low"] for v in table.values()), "high": sum(v["high"] for v in table.values()),
            "test_scorings": scorings, "sentences_per_test_set": per_set,
            "official_test_sets": [score["score_rate"] * scorings * (n - per_set) for n in OFFICIAL_TEST_SENTENCES]}


@lru_cache(maxsize=None)
def scored_test_sets(dataset: str, overrides: tuple[str, ...]) -> int:
    """How many test sets a Table 1 cell is scored on: its own and its ``test_datasets``."""
    return len(test_names(load_config(["profile=paper", f"dataset={dataset}", *overrides])))


def table1_text(table1: dict) -> str:
    """The Table 1 estimate in words, with what it assumes."""
    official = " to ".join(fmt_seconds(t).strip() for t in table1["official_test_sets"])
    shares = {m.name: m.generation_cost for m in registry.METHODS.values() if m.generation == "augment"}  # assumed
    return (f"Table 1 ({sum(table1['runs'].values())} runs: {table1['runs']}) at this speed, one run at a time: "
            f"{fmt_seconds(table1['low']).strip()} if S7 trains on gold alone, {fmt_seconds(table1['high']).strip()} "
            f"on gold + R x gold (every generation kept).\nA cell's gold size scales the taggers' training passes "
            f"and S2 to S6 (S4 whole); loading, dev scoring and test scoring do not grow. Test scoring counts "
            f"{table1['test_scorings']} test sets of {table1['sentences_per_test_set']:,.0f} sentences; the official "
            f"MultiCoNER test sets ({' to '.join(f'{n:,}' for n in OFFICIAL_TEST_SENTENCES)} sentences each) add "
            f"{official}. The baselines' generation costs {shares} of ACLM's S4+S5.\n"
            + "The optional rows (METHODS=...) add: " + "; ".join(
                f"{m} {v['runs']} runs, {fmt_seconds(v['low']).strip()} to {fmt_seconds(v['high']).strip()}"
                for m, v in table1["optional"].items())
            + " (Gold-only tuned at S1's epochs a rate: its longer patience may train up to ner.epochs; the LLM's "
            "writing at its assumed share); GLiNER's rows are not costed: no GLiNER run was measured.")


def fmt_seconds(s: float) -> str:
    return f"{s:8.1f} s" if s < 3600 else f"{s / 3600:8.1f} h"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--fresh", action="store_true", help="delete the setting's earlier run first")
    parser.add_argument("--json", type=Path, help="write the figures here (default: <run>/stage_costs.json)")
    args = parser.parse_args()
    setup_logging()
    # stored as a grid's run is (its S7 tagger pruned once scored): the Table 1 estimate's runs are a grid's;
    # its folders named after the overrides, as a stage script's are, so that it resumes their stages
    cfg = run_config(["profile=paper_shape", "method=aclm", "run_dir=runs/bench", *PRUNING, *args.overrides])
    root = layout.RunLayout.of(cfg).root
    if args.fresh:
        shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    done = run_method(cfg)
    wall = time.perf_counter() - start
    counts = facts(done[layout.DATA])
    rows = stage_rows(cfg, done, counts["train"], counts["dev"])

    device = "cuda: " + torch.cuda.get_device_name() if cfg.device != "cpu" and torch.cuda.is_available() else "cpu"
    print(f"\n{cfg.profile}: {cfg.dataset}, gold {cfg.gold}, seed {cfg.seed}, {device}, "
          f"{torch.get_num_threads()} threads; this call {wall:.0f} s (cached stages cost nothing). RSS is the "
          f"process's peak during the stage, memory earlier stages left allocated included.")
    print(f"{'stage':<16}{'wall':>11}{'per unit':>12}  {'unit':<13}{'RSS MB':>9}{'CUDA MB':>9}"
          f"{'written MB':>12}{'kept MB':>9}{'paper epochs/size':>20}")
    for r in rows:
        cuda = f"{r['cuda_peak_mb']:9.0f}" if "cuda_peak_mb" in r else f"{'-':>9}"
        print(f"{r['stage']:<16}{fmt_seconds(r['seconds']):>11}{r['per_unit']:11.1f}s  {r['unit']:<13}"
              f"{r.get('peak_rss_mb', 0):9.0f}{cuda}{r['bytes_written'] / 1e6:12.1f}{r['bytes_kept'] / 1e6:9.1f}"
              f"{fmt_seconds(r['paper_seconds']):>20}")
    pipeline, written, kept = (sum(r[key] for r in rows) for key in ("paper_seconds", "bytes_written", "bytes_kept"))
    table1 = table1_estimate(rows, counts["train"], counts["dev"])
    print(f"\none ACLM pipeline at the paper's epochs here: {fmt_seconds(pipeline).strip()} "
          f"(the paper: about 40 min on one A100)")
    print(f"bytes: {written / 1e9:.2f} GB written, {kept / 1e9:.2f} GB kept (storage.keep_models="
          f"{str(cfg.storage.keep_models).lower()})")
    print(table1_text(table1))
    flops = matmul_flops("cuda" if device.startswith("cuda") else "cpu")
    if not device.startswith("cuda"):
        scale = flops / A100_BF16_FLOPS
        print(f"FLOP-based GPU estimate (not measured): this CPU multiplies matrices at {flops / 1e9:.0f} GFLOP/s, "
              f"an A100 at {A100_BF16_FLOPS / 1e12:.0f} TFLOP/s (bf16 peak); if every stage kept the same share "
              f"of peak on both, one pipeline would take {pipeline * scale / 60:.1f} min and Table 1 "
              f"{table1['low'] * scale / 3600:.0f} to {table1['high'] * scale / 3600:.0f} A100-hours.")
    figures = {"profile": cfg.profile, "matmul_flops": flops, "dataset": cfg.dataset, "gold": cfg.gold, "device": device,
               "threads": torch.get_num_threads(), "stages": rows, "pipeline_paper_seconds": pipeline,
               "bytes_written": written, "bytes_kept": kept, "table1": table1}
    write_json(args.json or root / "stage_costs.json", figures)


if __name__ == "__main__":
    main_guard(main)
