"""How many runs one GPU holds at once: ``make reproduce-table1 JOBS=auto``.

Runs of a grid are separate processes; several fit on one card because a
run at the paper's sizes uses a fraction of it (docs/gpu-check.md: 2, 4 and
8 Gold-only runs at once gave 2.05, 3.54 and 5.25 times the runs per hour on
one H100).  A run's need is the largest CUDA peak of any stage, as measured:
in the stage stamps under ``<run_dir>/<profile>`` when runs there finished
on a GPU, else the GPU check's figure at paper size (S4: 16,313 MB in bf16).
A process holds more than its tensors' peak (the CUDA context, the
allocator's cache): 6,283 MB in use for an S1 peak of 5,057 MB, a factor of
1.25.  The card's free memory, 5% kept back, over that need, and at most one
run per CPU core.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

PAPER_PEAK_MB = 16313            # S4 at paper size, the largest stage peak (GPU check, one H200)
PROCESS_FACTOR = 1.25            # memory in use per process over its tensors' peak (nvidia-smi, one H100)
HEADROOM = 0.95                  # the share of the free memory the runs may fill


@dataclass(frozen=True)
class Packing:
    runs: int
    reason: str


def measured_peak(run_dir: Path, profile: str) -> Optional[int]:
    """The largest CUDA peak (MB) any finished stage under ``<run_dir>/<profile>`` recorded; None if none ran on a GPU."""
    peaks = [json.loads(p.read_text()).get("memory", {}).get("cuda_peak_mb")
             for p in (Path(run_dir) / profile).rglob("_stage.json")]
    return max((p for p in peaks if p), default=None)


def runs_per_gpu(free_mb: float, peak_mb: float, cpus: int) -> int:
    """Runs at once: the free memory (less the headroom) over a process's need, at least 1, at most ``cpus``."""
    return max(1, min(int(free_mb * HEADROOM // (peak_mb * PROCESS_FACTOR)), cpus))


def free_gpu_memory_mb() -> Optional[float]:
    """Free memory (MB) of the first visible GPU; None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    free, _ = torch.cuda.mem_get_info(0)
    return free / 2**20


def choose(run_dir: Path, profile: str) -> Packing:
    """How many runs of ``profile`` to start at once on this machine's first visible GPU, and why."""
    free = free_gpu_memory_mb()
    if free is None:
        return Packing(1, "no GPU visible: one run at a time (make -j N chooses another number)")
    measured = measured_peak(run_dir, profile)
    peak = measured or PAPER_PEAK_MB
    source = f"the largest stage peak measured in {Path(run_dir) / profile}" if measured else \
        "the paper-size S4 peak of the GPU check (no run of this profile has finished on a GPU here)"
    cpus = os.cpu_count() or 1
    runs = runs_per_gpu(free, peak, cpus)
    return Packing(runs, f"{runs} runs at once: {free:,.0f} MB free x {HEADROOM} / ({peak:,} MB, {source}, "
                         f"x {PROCESS_FACTOR} per process), at most {cpus} (CPU cores)")
