#!/usr/bin/env python
"""What one ACLM setting costs, stage by stage, and what the paper's Table 1 would.

    make bench-paper-shape                # the paper-size stand-ins on this machine (builds them first)
    python tools/stage_costs.py profile=paper_shape device=cuda generator.epochs=10 ner.epochs=100
    python tools/stage_costs.py --fresh --json costs.json profile=mini

Runs (or reuses) one ACLM setting with the given profile (paper_shape by default:
random weights at the paper's model sizes, the paper's batch sizes and R, one
epoch per training stage) and prints, for every stage, the wall time, the time
per epoch or per 1k sentences, the peak memory (process RSS; CUDA's peak
allocation on a GPU) and the bytes it wrote and kept (stored as a grid's run: the
S7 tagger pruned once scored).  It then scales the run to
the paper's epochs (ner.epochs, generator.epochs of the paper profile) and to a
full Table 1 (configs/grids/table1.yaml), under the assumptions it prints.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Optional

import torch

from aclm.base.config import load_config
from aclm.base import registry
from aclm.base.io import write_json
from aclm.base.runtime import setup_logging
from aclm.experiments.grid import PRUNING, expand, load_grid
from aclm.run import layout, outputs
from aclm.run.chain import run_method
from aclm.run.cli import main_guard
from aclm.run.layout import RunLayout
from aclm.run.naming import run_config
from aclm.run.stages import facts, pruned_files, stamp
from tools.epoch_times import later_epochs_mean

A100_BF16_FLOPS = 312e12           # dense bf16 peak of the paper's GPU (NVIDIA A100)


def matmul_flops(device: str, n: int = 2048, repeats: int = 5) -> float:
    """This device's dense float32 matmul throughput (FLOP/s), the yardstick of the GPU estimate."""
    a = torch.randn(n, n, device=device)
    torch.mm(a, a)
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        torch.mm(a, a)
    if device == "cuda":
        torch.cuda.synchronize()
    return 2 * n ** 3 * repeats / (time.perf_counter() - start)


def sentences_of(data: Path, split: str) -> int:
    return facts(data)[split]


def tagger_seconds_at(epochs_to: int, seconds: float, training: dict, grow: float = 1.0) -> Optional[float]:
    """A tagger stage's seconds at ``epochs_to`` epochs from the epochs it measured (``epoch_seconds``): what
    lies outside the epochs (loading, the final save) once, the first epoch's warm-up (CUDA kernels, the
    allocator) once, every epoch at the mean of the later ones, its training pass times ``grow``.  None with
    fewer than two epochs measured."""
    epochs = training.get("epoch_seconds") or []
    if len(epochs) < 2:
        return None
    spent = [e["train"] + e["dev"] + e.get("save", 0.0) for e in epochs]
    mean = later_epochs_mean(epochs)
    train, rest = mean["train"], mean["dev"] + mean["save"]
    return seconds - sum(spent) + max(spent[0] - train - rest, 0.0) + epochs_to * (train * grow + rest)


def stage_rows(cfg, done: dict[str, Path]) -> list[dict]:
    """One row per stage of the chain: its cost in this run and that cost scaled to the paper's settings.

    A tagger's epoch is its training pass plus one dev scoring pass (and one more
    at the end).  Where the stage recorded each epoch's seconds, they scale it
    (:func:`tagger_seconds_at`); else the scoring rate comes from the evaluation
    stage, so training can be scaled by the training-set size and scoring by the dev size.
    """
    paper = load_config(["profile=paper", f"dataset={cfg.dataset}"])
    data, scores = done[layout.DATA], list(done.values())[-1]
    train, dev = sentences_of(data, "train"), sentences_of(data, "dev")
    tested = sum(n for k, n in outputs.result(scores)["sizes"].items() if k.startswith("test:"))
    per_scored = stamp(scores)["seconds"] / tested        # seconds per sentence the tagger scores
    rows = []
    for name, path in done.items():
        record = stamp(path)
        built, seconds = record["facts"], record["seconds"]
        written = sum(record["outputs"].values())
        row = {"stage": name, "seconds": seconds, **record.get("memory", {}), "bytes_written": written,
               "bytes_kept": written - sum(pruned_files(path).values())}
        if name in (layout.S1, layout.S7):
            epochs, dev_pass = cfg.ner.epochs, dev * per_scored
            training = max(seconds - (epochs + 1) * dev_pass, 0.0) / epochs
            # the paper's S7 trains on gold + up to R x gold generations (all kept: an upper bound)
            grow = (1 + paper.generation.rounds) * train / built["train"] if name == layout.S7 else 1.0
            measured = tagger_seconds_at(paper.ner.epochs, seconds, built.get("training", {}), grow)
            row.update(unit="epoch", per_unit=seconds / epochs, paper_seconds=measured if measured is not None
                       else paper.ner.epochs * (training * grow + dev_pass) + dev_pass)
        elif name == layout.S4:
            row.update(unit="epoch", per_unit=seconds / cfg.generator.epochs,
                       paper_seconds=seconds / cfg.generator.epochs * paper.generator.epochs)
        elif name == layout.S5:
            row.update(unit="1k templates", per_unit=seconds / built["generated"] * 1000,
                       paper_seconds=seconds / built["generated"] * paper.generation.rounds * train)
        elif name in (layout.S1_EVAL, layout.S7_EVAL):
            row.update(unit="1k test sent.", per_unit=per_scored * 1000, paper_seconds=seconds)
        else:
            n = train + dev if name == layout.S2 else train
            row.update(unit="1k sentences", per_unit=seconds / n * 1000, paper_seconds=seconds)
        rows.append(row)
    return rows


def table1_estimate(rows: list[dict], gold: int) -> dict:
    """GPU-free extrapolation of a full Table 1 from one ACLM setting of ``gold`` training sentences.

    Every stage but test scoring is scaled by the gold size, a tagger's dev passes included (an upper bound);
    baselines cost S6 + S7 + an assumed share of ACLM's S4 + S5 (the method table's ``generation_cost``).
    """
    cost = {r["stage"]: r["paper_seconds"] for r in rows}
    fixed = cost.get(layout.S1_EVAL, cost.get(layout.S7_EVAL, 0.0))
    cells = expand(load_grid("table1"), "paper")
    total, runs = 0.0, {}
    for cell in cells:
        scale = cell.gold / gold
        runs[cell.method] = runs.get(cell.method, 0) + 1
        if cell.method == layout.GOLD_ONLY:
            total += cost[layout.S1] * scale + fixed
            continue
        generation = cost[layout.S4] + cost[layout.S5]
        method = registry.get(cell.method)
        if method.generation == "aclm":
            own = cost[layout.S2] + cost[layout.S3] + generation
        else:
            own = method.generation_cost * generation
        total += (own + cost[layout.S6] + cost[layout.S7]) * scale + fixed
    return {"runs": runs, "seconds": total}


def baseline_costs() -> dict[str, float]:
    """The assumed cost of each baseline's generation, as a share of ACLM's S4+S5 (none is measured here)."""
    return {m.name: m.generation_cost for m in registry.METHODS.values() if m.generation == "augment"}


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
    root = RunLayout.of(cfg).root
    if args.fresh:
        shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    done = run_method(cfg)
    wall = time.perf_counter() - start
    rows = stage_rows(cfg, done)

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
    pipeline = sum(r["paper_seconds"] for r in rows)
    written = sum(r["bytes_written"] for r in rows)
    kept = sum(r["bytes_kept"] for r in rows)
    table1 = table1_estimate(rows, sentences_of(done[layout.DATA], "train"))
    print(f"\none ACLM pipeline at the paper's epochs here: {fmt_seconds(pipeline).strip()} "
          f"(the paper: about 40 min on one A100)")
    print(f"bytes: {written / 1e9:.2f} GB written, {kept / 1e9:.2f} GB kept (storage.keep_models="
          f"{str(cfg.storage.keep_models).lower()})")
    print(f"Table 1 ({sum(table1['runs'].values())} runs: {table1['runs']}) at this speed: "
          f"{fmt_seconds(table1['seconds']).strip()}.\nAssumed: every stage's time but test scoring's grows "
          f"with the gold size (a tagger's dev passes too: an upper bound); S7 trains on gold + R x gold sentences (every generation kept, an upper bound); the "
          f"baselines' generation costs {baseline_costs()} of ACLM's S4+S5.")
    flops = matmul_flops("cuda" if device.startswith("cuda") else "cpu")
    if not device.startswith("cuda"):
        scale = flops / A100_BF16_FLOPS
        print(f"FLOP-based GPU estimate (not measured): this CPU multiplies matrices at {flops / 1e9:.0f} GFLOP/s, "
              f"an A100 at {A100_BF16_FLOPS / 1e12:.0f} TFLOP/s (bf16 peak); if every stage kept the same share "
              f"of peak on both, one pipeline would take {pipeline * scale / 60:.1f} min and Table 1 "
              f"{table1['seconds'] * scale / 3600:.0f} A100-hours.")
    figures = {"profile": cfg.profile, "matmul_flops": flops, "dataset": cfg.dataset, "gold": cfg.gold, "device": device,
               "threads": torch.get_num_threads(), "stages": rows, "pipeline_paper_seconds": pipeline,
               "bytes_written": written, "bytes_kept": kept, "table1": table1}
    write_json(args.json or root / "stage_costs.json", figures)


if __name__ == "__main__":
    main_guard(main)
