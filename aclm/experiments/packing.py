"""How many runs one GPU holds at once: ``make reproduce-table1 JOBS=auto``.

Runs of a grid are separate processes; several fit on one card because a
run at the paper's sizes uses a fraction of it (results/history/: 2, 4 and
8 Gold-only runs at once gave 2.05, 3.54 and 5.25 times the runs per hour on
one H100, 4 ACLM runs 3.78 times on one H200).  A stage needs what its process
holds on the card, more than its tensors' CUDA peak (the CUDA context, the
allocator's cache): 6,283 MB in use for an S1 peak of 5,057 MB, a factor of
1.25, and about 29 GB for S4's 16.3 GB, a factor of 1.78.  The peak is the one
measured in the stage stamps under ``<run_dir>/<profile>`` where runs there
finished on a GPU, else the one at paper size the GPU check measured
(configs/gpu_peaks.json); where a stamp also says what the allocator
reserved, that plus the context counts if it is more.  The card's free memory, 5% kept back, over that need, and at most one
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
from aclm.base.paths import CONFIG_DIR
from aclm.engine.memory import CONTEXT_MB, create

log = logging.getLogger("aclm.experiments.packing")

#: What each stage needs at paper size, as the GPU check last measured it (and writes after it measures):
#: ``cuda_peak_mb`` per stage (Gold-only's scoring, s1_eval, gets S7's scoring's; a baseline's generation stage,
#: augment, gets S4's, the largest: MulDA fine-tunes the same mBART-50); ``process_factor``, what a process holds
#: on the card (nvidia-smi) over its tensors' peak; ``in_use_over_peak_mb``, that pair where a stage holds far
#: more (fine-tuning mBART-50); ``fixed_mb``, what S4's and S5's processes hold whatever the sequence length
#: (weights, gradients and Adam's moments): the rest of their peak grows with the padded length, which
#: differs by language; ``reference_dataset``, the dataset whose padded length the others' are compared with.
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
    """Each dataset language's padded length over the reference dataset's (:data:`PEAKS_FILE`) (with ``generator``'s tokenizer);
    a language whose data is not here is left out (its stages lease the reference's need)."""
    from aclm.base.data import DataError

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
    """What each GPU stage among ``stages`` leases (MB): its need, measured or at paper size; and for S4 and
    S5 in each language of ``ratios`` (:func:`length_ratios`), ``<stage>@<language>``: measured in that
    language, else scaled by its padded length."""
    paper = peaks()
    needs = {s: measured.get(s, paper_need(s)) for s in sorted(set(stages))
             if paper["cuda_peak_mb"].get(s, GPU_STAGE_MB) >= GPU_STAGE_MB}
    for stage in [s for s in needs if s in paper["fixed_mb"]]:
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
