"""How many runs one GPU holds at once (``make reproduce-table1 JOBS=auto``), and what each stage leases.

A stage needs what its process holds on the card, more than its tensors' CUDA peak (context, allocator cache):
as measured in the stamps under ``<run_dir>/<profile>`` where runs finished on a GPU, else the GPU check's
paper-size peak times a per-process factor. Without a ledger every run counts at the largest need among the
grid's stages (S4's ~29 GB where ACLM or a baseline runs); with one (:mod:`aclm.engine.memory`) at its
tagger's, and each stage leases its own need while it runs. S4's and S5's needs grow with the padded batch
length, so they lease per language (``s4_generator@zh``).
Figures and why: docs/cost.md ("Several runs on one GPU", "Memory by language").
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from statistics import quantiles
from typing import Callable, Iterable, Mapping, Optional

from aclm.base.data import DataError
from aclm.base.datasets import get_spec, load_split
from aclm.base.models import load_path
from aclm.base.paths import CONFIG_DIR
from aclm.engine.memory import CONTEXT_MB, create

log = logging.getLogger("aclm.experiments.packing")

#: The GPU check's paper-size needs (it rewrites the file): ``cuda_peak_mb`` per stage (s1_eval gets S7's scoring's,
#: augment S4's: MulDA fine-tunes the same mBART-50); ``process_factor``, in use (nvidia-smi) over the tensors' peak,
#: or ``in_use_over_peak_mb`` where a stage holds far more; ``fixed_mb``, S4's and S5's length-independent part
#: (weights, gradients, Adam's moments); ``reference_dataset``, whose padded length the others scale from.
PEAKS_FILE = CONFIG_DIR / "gpu_peaks.json"
#: About the longest target in a batch of 32: what a batch pads to.
PADDED_QUANTILE = 0.97
HEADROOM = 0.95                  # the share of the free memory the runs may fill
TAGGERS = ("s1_ner", "s7_ner")   # every run trains one, for most of its time: what a run counts with a ledger
GPU_STAGE_MB = 100               # a smaller peak at paper size is a CPU stage's: no lease


@dataclass(frozen=True)
class Packing:
    runs: int
    reason: str


def peaks() -> dict:
    """The measured needs of :data:`PEAKS_FILE`, read on each call so that a new measurement counts at once."""
    return json.loads(PEAKS_FILE.read_text())


def process_factor(stage: str) -> float:
    """What a stage's process holds on the card over its tensors' CUDA peak."""
    measured = peaks()
    in_use, peak = measured["in_use_over_peak_mb"].get(stage, (None, None))
    return in_use / peak if in_use else measured["process_factor"]


def measured_needs(run_dir: Path, profile: str) -> dict[str, int]:
    """The most GPU memory (MB) a process of each stage held under ``<run_dir>/<profile>``, from GPU stamps: the
    CUDA peak times the stage's factor, or what the allocator reserved plus the context where that is more."""
    needs: dict[str, int] = {}
    for path in (Path(run_dir) / profile).rglob("_stage.json"):
        record = json.loads(path.read_text())
        memory, stage = record.get("memory", {}), path.parent.name
        if memory.get("cuda_peak_mb"):
            held = round(max(memory["cuda_peak_mb"] * process_factor(stage),
                             memory.get("cuda_reserved_mb", 0) + CONTEXT_MB))
            for key in {stage, record.get("lease") or stage}:          # s4_generator and s4_generator@zh
                needs[key] = max(held, needs.get(key, 0))
    return needs


def padded_length(dataset: str, generator: str) -> float:
    """What S4's and S5's batches of ``dataset`` pad to: a quantile of its targets' lengths in generator tokens."""
    from transformers import AutoTokenizer

    from aclm.steps.lengths import labelled, target_lengths

    trains = {member: load_split(member, "train") or [] for member in get_spec(dataset).union or [dataset]}
    tokenizer = labelled(AutoTokenizer.from_pretrained(load_path(generator)), [s for t in trains.values() for s in t])
    lengths = [n for member, train in trains.items()
               for n in target_lengths(tokenizer, train, get_spec(member).language)]
    return quantiles(lengths, n=100)[round(PADDED_QUANTILE * 100) - 1]


def length_ratios(datasets: Iterable[str], generator: str) -> dict[str, float]:
    """Each dataset language's padded length over the reference dataset's; a language whose data is not here is
    left out (its stages lease the reference's need)."""
    try:
        reference = padded_length(peaks()["reference_dataset"], generator)
    except (DataError, KeyError, OSError) as err:
        log.warning("S4/S5 memory by language not estimated: %s", err)
        return {}
    ratios = {}
    for dataset in sorted(set(datasets)):
        try:
            ratios[get_spec(dataset).language] = padded_length(dataset, generator) / reference
        except (DataError, KeyError, OSError) as err:
            log.warning("%s: S4/S5 memory at the reference's (%s)", dataset, err)
    return ratios


def language_need(stage: str, ratio: float) -> int:
    """A length-bound stage's need at paper size for a language whose batches pad ``ratio`` times as long as
    the reference's: the part that holds the weights stays, the rest scales."""
    measured = peaks()
    fixed, peak = measured["fixed_mb"][stage], measured["cuda_peak_mb"][stage]
    return round((fixed + (peak - fixed) * ratio) * process_factor(stage))


def paper_need(stage: str) -> int:
    """A stage's need at paper size; the largest for a stage the GPU check did not measure."""
    measured = peaks()["cuda_peak_mb"]
    peak = measured.get(stage)
    if peak is None:
        return max(map(paper_need, measured))
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


def stage_needs(stages: Iterable[str], measured: Mapping[str, int],
                ratios: Mapping[str, float] = {}) -> dict[str, int]:
    """What each GPU stage among ``stages`` leases (MB), measured or at paper size; S4 and S5 also per language
    of ``ratios`` (``<stage>@<language>``), measured there or scaled by the padded length."""
    paper = peaks()
    needs = {s: measured.get(s, paper_need(s)) for s in sorted(set(stages))
             if paper["cuda_peak_mb"].get(s, GPU_STAGE_MB) >= GPU_STAGE_MB}
    for stage in [s for s in needs if s in paper["fixed_mb"]]:
        for language, ratio in sorted(ratios.items()):
            needs[f"{stage}@{language}"] = measured.get(f"{stage}@{language}", language_need(stage, ratio))
    return needs


def choose(stages: Iterable[str], run_dir: Path, profile: str, ledger: Optional[Path] = None,
           ratios: Callable[[], Mapping[str, float]] = dict) -> Packing:
    """How many runs through ``stages`` to start at once on the first visible GPU, and why (``stages`` may be lazy:
    read only with a GPU).  With ``ledger``, runs count at their tagger's need and the ledger is written."""
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
        create(ledger, free * HEADROOM, stage_needs(stages, measured, ratios()))
        reason += f"; each stage leases its own need from {ledger}, a larger one waits for the memory"
    return Packing(runs, reason)
