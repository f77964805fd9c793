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
stage leases its own while it runs: a larger stage waits for the memory.  S4's and S5's needs grow with
the padded length of their batches, which depends on the language (zh's targets are about twice en's with
mBART-50's vocabulary): they lease per language (``s4_generator@zh``), measured in that language or scaled
from the reference's (:func:`language_need`, docs/cost.md).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional

from aclm.base.datasets import get_spec
from aclm.engine.memory import CONTEXT_MB, create

log = logging.getLogger("aclm.experiments.packing")

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
#: What S4's and S5's processes hold whatever the sequence length, at paper size: mBART-50's 611M parameters
#: with their gradients and Adam's two moments in fp32 (16 bytes each) while fine-tuning, its fp32 weights
#: while decoding.  The rest of their peak grows with the padded length, which differs by language.
FIXED_MB = {"s4_generator": 9322, "augment": 9322, "s5_generation": 2331}
#: The dataset PAPER_PEAKS_MB were measured on, whose padded length the other languages' are compared with.
REFERENCE_DATASET = "multiconer/en"
#: About the longest target in a batch of 32: what a batch pads to.
PADDED_QUANTILE = 0.97
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
        record = json.loads(path.read_text())
        memory, stage = record.get("memory", {}), path.parent.name
        if memory.get("cuda_peak_mb"):
            held = round(max(memory["cuda_peak_mb"] * process_factor(stage),
                             memory.get("cuda_reserved_mb", 0) + CONTEXT_MB))
            for key in {stage, record.get("lease") or stage}:          # s4_generator and s4_generator@zh
                needs[key] = max(held, needs.get(key, 0))
    return needs


def padded_length(dataset: str, generator: str) -> float:
    """What S4's and S5's batches of ``dataset`` pad to: the :data:`PADDED_QUANTILE` of its training targets'
    lengths in the generator's tokens (:mod:`aclm.steps.lengths`)."""
    from statistics import quantiles

    from transformers import AutoTokenizer

    from aclm.base.datasets import load_split
    from aclm.base.models import load_path
    from aclm.steps.lengths import labelled, target_lengths

    trains = {member: load_split(member, "train") or [] for member in get_spec(dataset).union or [dataset]}
    tokenizer = labelled(AutoTokenizer.from_pretrained(load_path(generator)), [s for t in trains.values() for s in t])
    lengths = [n for member, train in trains.items()
               for n in target_lengths(tokenizer, train, get_spec(member).language)]
    return quantiles(lengths, n=100)[round(PADDED_QUANTILE * 100) - 1]


def length_ratios(datasets: Iterable[str], generator: str) -> dict[str, float]:
    """Each dataset language's padded length over :data:`REFERENCE_DATASET`'s (with ``generator``'s tokenizer);
    a language whose data is not here is left out (its stages lease the reference's need)."""
    from aclm.base.data import DataError

    try:
        reference = padded_length(REFERENCE_DATASET, generator)
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
    fixed, peak = FIXED_MB[stage], PAPER_PEAKS_MB[stage]
    return round((fixed + (peak - fixed) * ratio) * process_factor(stage))


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


def stage_needs(stages: Iterable[str], measured: Mapping[str, int],
                ratios: Mapping[str, float] = {}) -> dict[str, int]:
    """What each GPU stage among ``stages`` leases (MB): its need, measured or at paper size; and for S4 and
    S5 in each language of ``ratios`` (:func:`length_ratios`), ``<stage>@<language>``: measured in that
    language, else scaled by its padded length."""
    needs = {s: measured.get(s, paper_need(s)) for s in sorted(set(stages))
             if PAPER_PEAKS_MB.get(s, GPU_STAGE_MB) >= GPU_STAGE_MB}
    for stage in [s for s in needs if s in FIXED_MB]:
        for language, ratio in sorted(ratios.items()):
            needs[f"{stage}@{language}"] = measured.get(f"{stage}@{language}", language_need(stage, ratio))
    return needs


def choose(stages: Iterable[str], run_dir: Path, profile: str, ledger: Optional[Path] = None,
           ratios: Callable[[], Mapping[str, float]] = dict) -> Packing:
    """How many runs going through ``stages`` to start at once on this machine's first visible GPU, and why
    (``stages`` is read only where there is a GPU: it may be a lazy iterator).  With ``ledger``, runs are
    counted at their tagger's need and the ledger is written for their stages to lease from, S4 and S5 per
    language by ``ratios()`` (:func:`length_ratios`, called only then)."""
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
