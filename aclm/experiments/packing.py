"""How many runs one GPU holds at once: ``make reproduce-table1 JOBS=auto``.

Runs of a grid are separate processes; several fit on one card because a
run at the paper's sizes uses a fraction of it (docs/gpu-check.md: 2, 4 and
8 Gold-only runs at once gave 2.05, 3.54 and 5.25 times the runs per hour on
one H100, 4 ACLM runs 3.78 times on one H200).  A stage needs what its process
holds on the card, more than its tensors' CUDA peak (the CUDA context, the
allocator's cache): 6,283 MB in use for an S1 peak of 5,057 MB, a factor of
1.25, and about 29 GB for S4's 16.3 GB, a factor of 1.78.  The peak is the one
measured in the stage stamps under ``<run_dir>/<profile>`` where runs there
finished on a GPU, else the one at paper size in the GPU check; where a stamp
also says what the allocator reserved, that plus the context counts if it is
more.  The card's free memory, 5% kept back, over that need, and at most one
run per CPU core.

Without a ledger every run is counted at the largest need among its stages,
so a grid's ACLM runs pack by S4's 29 GB.  With one (:mod:`aclm.engine.memory`,
what ``JOBS=auto`` uses) runs are counted at their tagger's need, and each
stage leases its own while it runs: a larger stage waits for the memory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional

from aclm.engine.memory import CONTEXT_MB, create

#: CUDA peak (MB) of each stage at paper size: the GPU check on one H200 (docs/gpu-check-h200.json).  Two
#: were not measured there: Gold-only's scoring (s1_eval) gets S7's scoring's, the same work on the same
#: tagger size; a baseline's generation stage (augment) gets S4's, the largest (MulDA fine-tunes the same
#: mBART-50).
PAPER_PEAKS_MB = {"data": 0, "s1_ner": 5054, "s1_eval": 2978, "s2_keywords": 2564, "s3_templates": 33,
                  "s4_generator": 16313, "s5_generation": 5871, "augment": 16313, "s6_postprocess": 0,
                  "s7_ner": 5054, "s7_eval": 2978}
PROCESS_FACTOR = 1.25            # memory in use per process over its tensors' peak (nvidia-smi, one H100)
#: Fine-tuning mBART-50 holds far more than its peak: 29,067 MB in use (nvidia-smi) during one ACLM run alone,
#: whose other stages peak below 6 GB, and 124,916 MB for four runs whose S4s ran at the same time (the fifth GPU
#: check, one H200, docs/gpu-check-h200-4.json).  The baselines' generation stage (augment) fine-tunes the same.
GENERATOR_FACTOR = 29067 / 16313
STAGE_FACTORS = {"s4_generator": GENERATOR_FACTOR, "augment": GENERATOR_FACTOR}
HEADROOM = 0.95                  # the share of the free memory the runs may fill
TAGGERS = ("s1_ner", "s7_ner")   # every run trains one, for most of its time: what a run counts with a ledger
GPU_STAGE_MB = 100               # a smaller peak at paper size is a CPU stage's: no lease


@dataclass(frozen=True)
class Packing:
    runs: int
    reason: str


def process_factor(stage: str) -> float:
    """What a stage's process holds on the card over its tensors' CUDA peak."""
    return STAGE_FACTORS.get(stage, PROCESS_FACTOR)


def measured_needs(run_dir: Path, profile: str) -> dict[str, int]:
    """The most GPU memory (MB) a process of each stage held under ``<run_dir>/<profile>``, from the stamps of
    the stages that ran on a GPU: the CUDA peak times the stage's factor, or what the allocator reserved plus
    the context where the stamp says so and that is more."""
    needs: dict[str, int] = {}
    for path in (Path(run_dir) / profile).rglob("_stage.json"):
        memory, stage = json.loads(path.read_text()).get("memory", {}), path.parent.name
        if memory.get("cuda_peak_mb"):
            held = max(memory["cuda_peak_mb"] * process_factor(stage),
                       memory.get("cuda_reserved_mb", 0) + CONTEXT_MB)
            needs[stage] = max(round(held), needs.get(stage, 0))
    return needs


def paper_need(stage: str) -> int:
    """A stage's need at paper size; the largest for a stage the GPU check did not measure."""
    peak = PAPER_PEAKS_MB.get(stage)
    if peak is None:
        return max(map(paper_need, PAPER_PEAKS_MB))
    return round(peak * process_factor(stage))


def need_mb(stages: Iterable[str], measured: Mapping[str, int]) -> tuple[int, str]:
    """The largest need among ``stages`` (measured, else at paper size) and which stage it is."""
    needs = {s: measured.get(s, paper_need(s)) for s in stages}
    stage = max(needs, key=needs.get)
    return needs[stage], f"{stage}, " + ("measured here" if stage in measured else "at paper size (GPU check)")


def runs_per_gpu(free_mb: float, need: float, cpus: int) -> int:
    """Runs at once: the free memory (less the headroom) over a process's need, at least 1, at most ``cpus``."""
    return max(1, min(int(free_mb * HEADROOM // max(need, 1)), cpus))


def free_gpu_memory_mb() -> Optional[float]:
    """Free memory (MB) of the first visible GPU; None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    free, _ = torch.cuda.mem_get_info(0)
    return free / 2**20


def stage_needs(stages: Iterable[str], measured: Mapping[str, int]) -> dict[str, int]:
    """What each GPU stage among ``stages`` leases (MB): its need, measured or at paper size."""
    return {s: measured.get(s, paper_need(s)) for s in sorted(set(stages))
            if PAPER_PEAKS_MB.get(s, GPU_STAGE_MB) >= GPU_STAGE_MB}


def choose(stages: Iterable[str], run_dir: Path, profile: str, ledger: Optional[Path] = None) -> Packing:
    """How many runs going through ``stages`` to start at once on this machine's first visible GPU, and why
    (``stages`` is read only where there is a GPU: it may be a lazy iterator).  With ``ledger``, runs are
    counted at their tagger's need and the ledger is written for their stages to lease from."""
    free = free_gpu_memory_mb()
    if free is None:
        if ledger:
            Path(ledger).unlink(missing_ok=True)      # an earlier GPU's ledger must not ration these runs
        return Packing(1, "no GPU visible: one run at a time (make -j N chooses another number)")
    stages, measured, cpus = list(stages), measured_needs(run_dir, profile), os.cpu_count() or 1
    counted = [s for s in stages if s in TAGGERS] if ledger else []
    need, source = need_mb(counted or stages, measured)
    runs = runs_per_gpu(free, need, cpus)
    reason = (f"{runs} runs at once: {free:,.0f} MB free x {HEADROOM} / {need:,} MB (what a process of {source} "
              f"holds), at most {cpus} (CPU cores)")
    if ledger:
        create(ledger, free * HEADROOM, stage_needs(stages, measured))
        reason += f"; each stage leases its own need from {ledger}, a larger one waits for the memory"
    return Packing(runs, reason)
