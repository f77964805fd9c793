"""The CUDA code paths: each runs on the GPU and, where it is deterministic, agrees with the CPU.

Marked ``cuda`` (``pytest -m cuda``; ``make gpu-check`` runs them first) and
skipped without a CUDA device.  ``ACLM_CUDA_TESTS_ON_CPU=1`` runs them on the
CPU instead: the check's dry mode does, so that the tests themselves keep
working where no GPU is; that exercises no CUDA path at all.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import flair
import pytest
import torch


from aclm.base.config import load_config
from aclm.base.data import read_conll
from aclm.base.io import read_json
from aclm.base.paths import PROJECT_ROOT
from aclm.base.runtime import select_device
from aclm.stages import layout
from aclm.run.chain import run_method
from aclm.engine import STAMP
from aclm.steps.constraints import template_entities
from aclm.steps.generator import add_label_tokens, load_generator, training_arguments
from aclm.steps.generation import Job, decode_jobs, nearest_neighbours
from aclm.steps.keywords import extract_keywords
from aclm.steps.labels import parse_generation
from aclm.steps.ner import amp
from conftest import f1_of_predictions
from aclm.steps.templates import render, skeleton

pytestmark = pytest.mark.cuda


SAMPLE = PROJECT_ROOT / "data" / "sample" / "en" / "train.conll"
GPU_STAGES = (layout.S1, layout.S2, layout.S4, layout.S5, layout.S7, layout.S7_EVAL)


@pytest.fixture(scope="module")
def device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    if os.environ.get("ACLM_CUDA_TESTS_ON_CPU") == "1":
        return torch.device("cpu")
    pytest.skip("no CUDA device (ACLM_CUDA_TESTS_ON_CPU=1 runs these tests on the CPU)")


@contextmanager
def exact_matmuls():
    """fp32 matmuls without TF32 inside the block: the GPU result is then comparable with the CPU's."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@pytest.fixture(scope="module")
def sentences():
    return read_conll(SAMPLE)


@pytest.fixture(scope="module")
def aclm_chain(device, fast, tmp_path_factory) -> dict[str, Path]:
    """The whole ACLM chain of the tiny profile on the device: S1 (AMP), S2, S4 (bf16), S5, S7."""
    return run_method(fast(tmp_path_factory.mktemp("runs"), "method=aclm", f"device={device.type}"))


def test_every_stage_of_the_chain_runs_and_records_cuda_memory(aclm_chain, device):
    for name in GPU_STAGES:
        memory = read_json(aclm_chain[name] / STAMP).get("memory", {})
        assert ("cuda_peak_mb" in memory) == (device.type == "cuda"), name
        assert memory.get("cuda_peak_mb", 1) > 0, name
        assert memory.get("cuda_reserved_mb", 1) >= memory.get("cuda_peak_mb", 0), name   # packing counts it
    result = read_json(aclm_chain[layout.S7_EVAL] / layout.RESULT)
    assert result["f1"] == pytest.approx(f1_of_predictions(aclm_chain[layout.S7_EVAL], "sample/en"))


def test_tagger_uses_amp_and_generator_bf16_on_cuda(device, tiny_models, tmp_path, monkeypatch):
    cfg = load_config(["profile=tiny"])
    monkeypatch.setattr(flair, "device", device)
    assert amp(cfg.ner) == (device.type == "cuda")
    args = training_arguments(cfg.generator, tmp_path, seed=1, device=device)
    half = device.type == "cuda"
    bf16 = half and torch.cuda.is_bf16_supported()
    assert (args.bf16, args.fp16) == (bf16, half and not bf16)


def test_select_device_allows_tf32_and_matmuls_stay_close_to_the_cpu(device, monkeypatch):
    monkeypatch.setattr(flair, "device", flair.device)
    with exact_matmuls():                                       # restores the flags select_device sets
        select_device(device.type)
        if device.type == "cuda":
            assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        torch.manual_seed(0)
        a, b = torch.randn(512, 512), torch.randn(512, 512)
        exact = (a.double() @ b.double()).float()
        tf32 = (a.to(device) @ b.to(device)).cpu()                 # TF32 keeps about 3 decimal digits
        assert torch.allclose(tf32, exact, rtol=1e-2, atol=1e-1)
    with exact_matmuls():
        assert torch.allclose((a.to(device) @ b.to(device)).cpu(), exact, rtol=1e-4, atol=1e-3)


def test_attention_keywords_on_the_device_equal_the_cpus(device, tiny_models, sentences):
    from transformers import AutoModel, AutoTokenizer

    cfg = load_config(["profile=tiny"]).keywords
    path = str(tiny_models / "xlm-roberta")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager")
    on_cpu, cpu_records, _ = extract_keywords(model, tokenizer, sentences, cfg, "en", torch.device("cpu"), seed=1)
    with exact_matmuls():
        on_device, records, counts = extract_keywords(model.to(device), tokenizer, sentences, cfg, "en", device, seed=1)
    assert on_device == on_cpu and counts["failed"] == 0
    for mine, theirs in zip(records, cpu_records):
        assert mine["scores"].keys() == theirs["scores"].keys()
        assert all(mine["scores"][i] == pytest.approx(theirs["scores"][i], rel=1e-3, abs=1e-5) for i in mine["scores"])


def test_retrieval_on_the_device_finds_the_cpus_neighbours(device, tiny_models, sentences):
    texts = list(dict.fromkeys(" ".join(s.tokens) for s in sentences))
    embedder = str(tiny_models / "sbert")
    on_cpu = nearest_neighbours(texts, embedder, k=2, batch_size=16, device=torch.device("cpu"))
    with exact_matmuls():
        on_device = nearest_neighbours(texts, embedder, k=2, batch_size=16, device=device)
    same = sum(a == b for a, b in zip(on_device, on_cpu))
    assert same >= 0.98 * len(texts)            # near-ties between two neighbours may swap, nothing else


def test_batched_generation_runs_and_its_scores_equal_the_cpus(device, tiny_models, sentences):
    cfg = load_config(["profile=tiny"])
    model, tokenizer = load_generator(str(tiny_models / "mbart-large-50"), "en")
    types = sorted({t for s in sentences for _, _, t in s.spans()})
    labels = add_label_tokens(model, tokenizer, types, dict(cfg.generator.label_token_init))
    templates = [render(skeleton(s, range(0, len(s), 3)), tokenizer.mask_token) for s in sentences[:24]]
    enc = tokenizer(templates, return_tensors="pt", padding=True)
    start = torch.full((len(templates), 1), model.config.decoder_start_token_id)
    model.eval()
    with torch.inference_mode():
        on_cpu = model(**enc, decoder_input_ids=start).logits
        with exact_matmuls():
            on_device = model.to(device)(**enc.to(device), decoder_input_ids=start.to(device)).logits.cpu()
    assert torch.allclose(on_device, on_cpu, rtol=1e-3, atol=1e-4)
    jobs = [Job(i, 0, None, t) for i, t in enumerate(templates)]     # sampled: runs, but no two devices agree
    outputs, _ = decode_jobs(model, tokenizer, jobs, cfg.generation, labels, [tokenizer.src_lang] * len(jobs), 1,
                          device)
    assert len(outputs) == len(jobs) and all(isinstance(o, str) for o in outputs)


def test_entities_decoding_on_the_device_parses_and_keeps_every_template_entity(device, tiny_models, sentences):
    cfg = load_config(["profile=tiny", "generation.constrained=entities", "generation.num_beams=5",
                       "generation.max_length=100"])
    model, tokenizer = load_generator(str(tiny_models / "mbart-large-50"), "en")
    types = sorted({t for s in sentences for _, _, t in s.spans()})
    labels = add_label_tokens(model, tokenizer, types, dict(cfg.generator.label_token_init))
    templates = [render(skeleton(s, range(1, len(s), 2)), tokenizer.mask_token) for s in sentences if s.spans()]
    jobs = [Job(i, 0, None, t) for i, t in enumerate(templates)]
    outputs, _ = decode_jobs(model.to(device), tokenizer, jobs, cfg.generation, labels, ["en_XX"] * len(jobs), 1,
                          device)
    assert len(outputs) == len(jobs) >= 40
    for template, text in zip(templates, outputs):
        parse_generation(text, types)
        assert template_entities(text, labels) == template_entities(template, labels), (template, text)
