#!/usr/bin/env python
"""The GPU check's measurements, each run as a step of its own (tools/gpu_check.py, docs/gpu-check.md).

    python tools/gpu_measure.py generation out.json '{"batch_size": 32, "templates": 256}' profile=paper_shape device=cuda

Writes the figures of one measurement to a JSON file: its options are a JSON object, the rest config overrides.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import json
import os
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator, Optional
from unittest.mock import patch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))         # run as a script on a node where the project is not installed

import torch
from omegaconf import OmegaConf

from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, entity_types
from aclm.base.datasets import load_split
from aclm.base.runtime import library_versions, seed_everything, select_device
from aclm.engine import memory
from aclm.experiments import packing
from aclm.steps.screening import MalformedGeneration

# The libraries a measurement needs are imported inside it, so that `environment` reports on a node where
# flair or transformers is missing or broken, and benchmark.py and stage_costs.py take the clock alone.


def measure_environment(overrides: list[str]) -> dict:
    facts = {"cuda": torch.cuda.is_available(), "torch_cuda": torch.version.cuda, "libraries": library_versions()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        facts.update(device=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                     capability=f"{props.major}.{props.minor}", bf16=torch.cuda.is_bf16_supported())
    return facts


@contextmanager
def clocked(device: torch.device) -> Iterator[dict]:
    """The block's ``seconds`` (wall), ``cpu_s`` (this process, every thread) and ``cuda_peak_mb`` (None off
    CUDA), the GPU's queue drained at both ends: the one clock of the measurement tools."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    took: dict = {}
    start, cpu = time.perf_counter(), time.process_time()
    yield took
    if cuda:
        torch.cuda.synchronize()
    took.update(seconds=time.perf_counter() - start, cpu_s=time.process_time() - cpu,
                cuda_peak_mb=round(torch.cuda.max_memory_allocated() / 2**20) if cuda else None)


def parsed(parse, *args) -> Optional[TaggedSentence]:
    """``parse(*args)``, or None for a malformed generation."""
    try:
        return parse(*args)
    except MalformedGeneration:
        return None


def measure_generation(overrides: list[str], batch_size: int, templates: int) -> dict:
    """Templates/s, CUDA peak and the share that parse and keep their entities, at one batch size with the
    paper's decoding (5 beams, top-k 10, up to 100 tokens) under the overrides' ``generation.constrained``.
    Random weights never stop early: an upper bound."""
    from aclm.steps.constraints import template_entities
    from aclm.steps.generation import Job, decode_jobs
    from aclm.steps.generator import add_label_tokens, load_generator
    from aclm.steps.labels import parse_generation
    from aclm.steps.templates import render, skeleton

    cfg = load_config(overrides)
    device = torch.device(cfg.device)
    model, tokenizer = load_generator(cfg.generator.model, "en")
    sentences = [s for s in load_split(cfg.dataset, "train") if s.spans()]
    rng = random.Random(1)                 # entities kept, 30% of the other words as keywords
    jobs = [Job(i, 0, None, render(skeleton(s, [w for w in range(len(s)) if rng.random() < 0.3]), tokenizer.mask_token))
            for i, s in enumerate(sentences[i % len(sentences)] for i in range(templates))]
    types = sorted(entity_types(sentences))
    labels = add_label_tokens(model, tokenizer, types, dict(cfg.generator.label_token_init))
    model.to(device)
    decoding = OmegaConf.merge(load_config(["profile=paper"]).generation,
                               {"batch_size": batch_size, "constrained": cfg.generation.constrained})
    with clocked(device) as took:
        outputs, _ = decode_jobs(model, tokenizer, jobs, decoding, labels, [tokenizer.src_lang] * len(jobs), 1, device)
    kept = sum(parsed(parse_generation, text, types, tokenizer.mask_token) is not None
               and template_entities(text, labels) == template_entities(job.template, labels)
               for job, text in zip(jobs, outputs))
    return {"batch_size": batch_size, "constrained": decoding.constrained, "templates": len(jobs),
            "seconds": round(took["seconds"], 2), "templates_per_s": round(len(jobs) / took["seconds"], 2),
            "parse_and_keep_entities": round(kept / len(jobs), 3), "cuda_peak_mb": took["cuda_peak_mb"]}


#: Model shapes for the LLM's cost at random weights: the paper profile's ``llm.model`` (Qwen2.5-7B-Instruct's
#: config.json) and a tiny one for the dry run.  No instruction-tuned LM installs offline, so the shape stands in.
LLM_SHAPES = {
    "qwen2.5-7b": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                   "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
                   "max_position_embeddings": 32768, "tie_word_embeddings": False},
    "tiny": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 0, "max_position_embeddings": 2048},
}


def measure_llm_generation(overrides: list[str], batch_size: int, prompts: int, shape: str) -> dict:
    """Responses/s and CUDA peak of the LLM method's writing (``baselines.llm.write``: its prompts, grammar and
    sampling) with a random model of ``shape`` in bf16 and a byte-level BPE trained on the dataset's text (8k
    pieces cut English about as Qwen's do).  Random weights never end a response: an upper bound."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from baselines import llm
    from baselines.linearize import screen, tag_vocabulary
    from tools.tiny_models import train_gpt2_tokenizer

    cfg = load_config(overrides)
    device = torch.device(cfg.device)
    sentences = [s for s in load_split(cfg.dataset, "train", cfg.data_dir) if s.spans()][:max(prompts, 100)]
    tokenizer = train_gpt2_tokenizer([" ".join(s.tokens) for s in sentences], 8000 if shape != "tiny" else 2000,
                                     1 << 15)
    tokenizer.padding_side, tokenizer.pad_token = "left", tokenizer.eos_token
    tags = sorted(tag_vocabulary(sentences))
    tokenizer.add_special_tokens({"additional_special_tokens": tags}, replace_additional_special_tokens=False)
    dims = {**LLM_SHAPES[shape], "vocab_size": max(LLM_SHAPES[shape]["vocab_size"], len(tokenizer))}
    dtype, default = (torch.bfloat16 if device.type == "cuda" else torch.float32), torch.get_default_dtype()
    torch.manual_seed(cfg.seed)
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(Qwen2Config(**dims, eos_token_id=tokenizer.eos_token_id)).eval()
    finally:
        torch.set_default_dtype(default)
    m = OmegaConf.merge(cfg.llm, {"batch_size": batch_size})
    types = sorted(entity_types(sentences))
    shown = llm.demonstrations(["en"] * len(sentences), m.shots, 1, cfg.seed)[:prompts]
    texts = [llm.prompt_text(tokenizer, llm.instruction(m.prompt, [sentences[j] for j in js], "en", types,
                                                        m.type_names)) for js in shown]
    tag_ids, classes = set(tokenizer.convert_tokens_to_ids(tags)), llm.token_classes(tokenizer, tags)
    llm.write(model, tokenizer, texts[:batch_size], m, classes, tag_ids, cfg.seed, device)    # warm-up
    with clocked(device) as took:
        written = llm.write(model, tokenizer, texts, m, classes, tag_ids, cfg.seed, device)
    _, screening = screen([r.sample for r in written], set(tags), sentences)
    return {"shape": shape, "parameters": sum(p.numel() for p in model.parameters()), "batch_size": batch_size,
            "prompts": len(texts), "max_new_tokens": m.max_new_tokens,
            "prompt_tokens_mean": round(sum(len(tokenizer(t)["input_ids"]) for t in texts) / len(texts), 1),
            "seconds": round(took["seconds"], 2), "responses_per_s": round(len(texts) / took["seconds"], 3),
            "screening": screening, "cuda_peak_mb": took["cuda_peak_mb"]}


def measure_dev_scoring(overrides: list[str], run_dir: str, batch_sizes: list[int]) -> dict:
    """The pipeline's S1 tagger scoring dev as flair's trainer does each epoch, per batch size: seconds without
    and with flair's per-epoch ``dev.tsv`` (the stage no longer writes it), CUDA peak, same spans at every size?"""
    from aclm.steps.ner import LABEL_TYPE, load_tagger, to_flair

    cfg = load_config(overrides)
    device = select_device(cfg.device)
    tagger = load_tagger(next(Path(run_dir).rglob("s1_ner/best-model.pt")))
    dev = load_split(cfg.dataset, "dev", cfg.data_dir)

    def score(batch_size: int, out_path: Optional[Path]) -> tuple[dict, list]:
        sentences = to_flair(dev)
        with clocked(device) as took:
            tagger.evaluate(sentences, gold_label_type=LABEL_TYPE, mini_batch_size=batch_size, out_path=out_path,
                            embedding_storage_mode="none")
        return took, [[(l.unlabeled_identifier, l.value) for l in s.get_labels("predicted")] for s in sentences]

    score(batch_sizes[0], None)                     # warm-up: kernels, allocator
    points, first = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for size in batch_sizes:
            took, spans = score(size, None)
            with_file, _ = score(size, Path(tmp) / "dev.tsv")
            first = spans if first is None else first
            points.append({"batch_size": size, "seconds": round(took["seconds"], 3),
                           "with_dev_file_s": round(with_file["seconds"], 3), "cuda_peak_mb": took["cuda_peak_mb"],
                           "same_spans_as_first": spans == first})
    return {"sentences": len(dev), "points": points}


def tagger_setting(overrides: list[str], epochs: int) -> tuple:
    """The measured S1 tagger's config (``epochs`` epochs), its first 100 train sentences, dev set and types."""
    cfg = load_config([*overrides, f"ner.epochs={epochs}"])
    select_device(cfg.device)
    train, dev = load_split(cfg.dataset, "train", cfg.data_dir)[:100], load_split(cfg.dataset, "dev", cfg.data_dir)
    return cfg, train, dev, sorted(entity_types(train + dev))


def measure_tagger_profile(overrides: list[str], epochs: int, top: int = 15) -> dict:
    """A paper-size tagger's epochs by function (cProfile, own time) and GPU kernel time (torch.profiler)."""
    from aclm.steps.ner import train_tagger

    cfg, train, dev, types = tagger_setting(overrides, epochs)
    seed_everything(cfg.seed)
    profiler, figures = cProfile.Profile(), {}
    with tempfile.TemporaryDirectory() as out:
        kernels = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) \
            if torch.cuda.is_available() else None
        with clocked(select_device(cfg.device)) as took, kernels or nullcontext():
            profiler.enable()
            _, facts = train_tagger(cfg.ner, train, dev, types, Path(out))
            profiler.disable()
    if kernels:
        busy = [e for e in kernels.key_averages() if e.self_device_time_total > 0]
        figures.update(gpu_kernel_s=round(sum(e.self_device_time_total for e in busy) / 1e6, 3),
                       gpu_kernels=sum(e.count for e in busy))
    rows = sorted(((f"{Path(file).name}:{line}({name})", calls, own, total)
                   for (file, line, name), (_, calls, own, total, _) in pstats.Stats(profiler).stats.items()),
                  key=lambda r: -r[2])
    return {"epochs": epochs, "seconds": round(took["seconds"], 2), "training": facts, **figures,
            "by_own_time": [{"function": f, "calls": c, "own_s": round(o, 3), "cumulative_s": round(t, 3)}
                            for f, c, o, t in rows[:top]]}


def measure_tagger_subtokens(overrides: list[str], epochs: int) -> dict:
    """S1's tagger trained twice from one seed, sub-tokens batched and with flair's loops: epoch seconds, same
    dev scores? 3 untimed epochs first, so neither timed run pays the process's warm-up."""
    from aclm.steps.ner import train_tagger

    cfg, train, dev, types = tagger_setting(overrides, epochs)
    with tempfile.TemporaryDirectory() as out:
        seed_everything(cfg.seed)
        train_tagger(OmegaConf.merge(cfg.ner, {"epochs": min(3, epochs)}), train, dev, types, Path(out))
    runs = {}
    for name in ("batched", "flair"):
        seed_everything(cfg.seed)
        loops = patch("aclm.steps.ner.batched_subtokens", nullcontext) if name == "flair" else nullcontext()
        with tempfile.TemporaryDirectory() as out, loops:
            _, facts = train_tagger(cfg.ner, train, dev, types, Path(out))
            with (Path(out) / "loss.tsv").open() as f:
                rows = csv.DictReader(f, delimiter="\t")
                scores = [{k: v for k, v in row.items() if k.startswith("DEV")} for row in rows]
        runs[name] = {"epoch_seconds": facts["epoch_seconds"], "dev": scores}
    return {"epochs": epochs, "dev_sentences": len(dev), "runs": runs,
            "same_dev_scores": runs["batched"]["dev"] == runs["flair"]["dev"]}


def gpu_memory_used() -> Optional[int]:
    """MiB in use on GPU 0 by every process (CUDA contexts included), from nvidia-smi; None without it."""
    if not shutil.which("nvidia-smi"):
        return None
    done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                          capture_output=True, text=True)
    return int(done.stdout.split()[0]) if done.returncode == 0 and done.stdout.strip() else None


def measure_packing(overrides: list[str], jobs: int, method: str, run_dir: str) -> dict:
    """``jobs`` runs of ``method`` at once from scratch, as ``make -j`` packs them; other methods than Gold-only
    lease memory from a ledger as under ``JOBS=auto`` (no GPU: 1.5 S4s, so stages do wait)."""
    folder = Path(run_dir)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env, figures = None, {}
    if method != "gold_only":
        needs = packing.stage_needs(packing.peaks()["cuda_peak_mb"], {})
        free = packing.free_gpu_memory_mb()
        capacity = free * packing.HEADROOM if free is not None else 1.5 * needs["s4_generator"]
        memory.create(folder / "gpu.json", capacity, needs)
        figures["ledger"] = {"capacity_mb": round(capacity), "needs_mb": needs}
        env = {**os.environ, memory.LEDGER_ENV: str(folder / "gpu.json")}
    start, peak = time.perf_counter(), None
    processes = [subprocess.Popen([sys.executable, str(ROOT / "scripts" / "run_method.py"), f"method={method}",
                                   f"seed={seed}", f"run_dir={folder}", *overrides], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL) for seed in range(1, jobs + 1)]
    while any(p.poll() is None for p in processes):
        peak = max(filter(None, [peak, gpu_memory_used()]), default=None)
        time.sleep(1)
    if any(p.returncode for p in processes):
        raise RuntimeError(f"{sum(bool(p.returncode) for p in processes)} of the {jobs} packed runs failed")
    wall = time.perf_counter() - start
    stamps = [json.loads(p.read_text()) for p in sorted(folder.rglob("s1_ner/_stage.json"))]
    return {"method": method, "jobs": jobs, "wall_s": round(wall, 1), "runs_per_hour": round(jobs * 3600 / wall, 1),
            "gpu_memory_used_mb": peak, **figures,
            "s1": [{"seconds": s["seconds"], **s.get("memory", {})} for s in stamps]}


MEASUREMENTS = {"environment": measure_environment, "generation": measure_generation,
                "llm-generation": measure_llm_generation, "dev-scoring": measure_dev_scoring,
                "tagger-profile": measure_tagger_profile, "tagger-subtokens": measure_tagger_subtokens,
                "packing": measure_packing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=sorted(MEASUREMENTS))
    parser.add_argument("json", type=Path, help="where the figures go")
    parser.add_argument("options", type=json.loads, help="the measurement's options, a JSON object")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="profile=... device=...")
    args = parser.parse_args()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(MEASUREMENTS[args.what](args.overrides, **args.options), indent=2) + "\n")


if __name__ == "__main__":
    main()
