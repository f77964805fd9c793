#!/usr/bin/env python
"""Throughput of the ACLM stages on this machine, and the released code's approach beside ours.

    make bench                                   # = python tools/benchmark.py (tiny models)
    python tools/benchmark.py profile=paper_shape --sentences 200 --compare 8
    python tools/benchmark.py device=cuda ner.model=xlm-roberta-large generator.model=facebook/mbart-large-50 \\
        generation.mixner.embedder=sentence-transformers/distiluse-base-multilingual-cased-v2

Prints sentences per second for S2, S3, retrieval (1k and 15k sentences) and S5; then, on the same models
and data, the released code's way against ours: a ``text2text-generation`` pipeline call per template
against batched decoding (the paper's decoding), usable augmentations per CPU second under each
``generation.constrained`` mode (meaningful only with a fine-tuned ``generator.model=<S4 folder>``: keep
one with storage.keep_models=true), and scipy's pairwise cosine loop, extrapolated to 15k, against our
search. ``key=value`` overrides the config (default profile=tiny device=cpu). Sentences: multiconer/en
if present, else the bundled sample. Results: docs/cost.md, docs/constrained-decoding.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools is no installed package: the checkout's

import torch
from omegaconf import OmegaConf
from transformers import AutoModel, AutoTokenizer

from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, entity_types, read_conll
from aclm.base.datasets import load_split
from aclm.base.models import model_path
from aclm.steps.constraints import MODES, LabelGrammar
from aclm.steps.generation import Job, decode_jobs, decode_keeping_labels, nearest_neighbours
from aclm.steps.generator import add_label_tokens, language_code, load_generator
from aclm.steps.keywords import extract_keywords
from aclm.steps.labels import PARSERS, label_tokens, parse_generation
from aclm.steps.templates import dynamic_mask, render, skeleton
from tools.generation_quality import entities
from tools.gpu_measure import clocked, parsed

FULL_RETRIEVAL = 15_000


def corpus(n: int) -> list[TaggedSentence]:
    try:
        sentences = load_split("multiconer/en", "train", None)
    except FileNotFoundError:
        sentences = read_conll(Path("data/sample/en/train.conll"))
    return [sentences[i % len(sentences)] for i in range(n)]


def timed(device, fn, *args, **kwargs) -> tuple[float, object]:
    """``fn(*args, **kwargs)``'s seconds (:func:`clocked`) and result."""
    with clocked(device) as took:
        out = fn(*args, **kwargs)
    return took["seconds"], out


@contextmanager
def grammar_clock(device) -> Iterator[list[float]]:
    """Seconds of every :class:`LabelGrammar` call (one per decoding step) while the block runs (each resets
    CUDA's peak memory: no clock around the block can report one)."""
    spent: list[float] = []
    call = LabelGrammar.__call__

    def clocked_call(self, input_ids, scores):
        seconds, out = timed(device, call, self, input_ids, scores)
        spent.append(seconds)
        return out

    LabelGrammar.__call__ = clocked_call
    try:
        yield spent
    finally:
        LabelGrammar.__call__ = call


def released_generation(model, tokenizer, templates: list[str], decoding, code: str, device,
                        keep_ids: set[int]) -> tuple[dict, list[str]]:
    """The released code's decoding: one pipeline call per template; its time and outputs (label tokens kept)."""
    from transformers import pipeline

    generate = pipeline("text2text-generation", model=model, tokenizer=tokenizer, device=device)
    generate.generation_config.max_new_tokens = None   # the pipeline's own default (256) would override max_length
    outputs = []
    with clocked(device) as took:
        for i, template in enumerate(templates):
            torch.manual_seed(i)
            ids = generate(template, do_sample=True, top_k=decoding.top_k, num_beams=decoding.num_beams,
                           max_length=decoding.max_length, forced_bos_token_id=tokenizer.convert_tokens_to_ids(code),
                           return_tensors=True)[0]["generated_token_ids"]
            outputs.append(decode_keeping_labels(tokenizer, ids.tolist(), keep_ids))
    return took, outputs


def usable(text: str, source: TaggedSentence, types: list[str]) -> bool:
    """Well formed (the project's parse), every entity of ``source`` kept (words and type), not a copy of it."""
    sentence = parsed(parse_generation, text, types)
    return sentence is not None and not (entities(source) - entities(sentence)) and sentence.tokens != source.tokens


def usable_comparison(model, tokenizer, sentences: list[TaggedSentence], templates: list[str], decoding, types,
                      code: str, device) -> dict[str, dict]:
    """Per approach: seconds (wall, CPU), usable augmentations, and for the constrained modes the grammar's time."""
    labels = label_tokens(types)
    keep_ids = set(tokenizer.convert_tokens_to_ids(labels)) | {tokenizer.mask_token_id}
    jobs = [Job(i, 0, None, t) for i, t in enumerate(templates)]
    runs = {"released": (*released_generation(model, tokenizer, templates, decoding, code, device, keep_ids), [])}
    for mode in MODES:
        with grammar_clock(device) as spent, clocked(device) as took:
            outputs, _ = decode_jobs(model, tokenizer, jobs, OmegaConf.merge(decoding, {"constrained": mode}), labels,
                                     [code] * len(jobs), 1, device)
        runs[mode] = (took, outputs, spent)
    out = {}
    for name, (took, outputs, spent) in runs.items():
        good = sum(usable(text, sentences[i], types) for i, text in enumerate(outputs))
        out[name] = {"wall_s": took["seconds"], "cpu_s": took["cpu_s"], "usable": good,
                     "usable_per_cpu_s": good / took["cpu_s"],
                     "accepted_released_rule": sum(parsed(PARSERS["released"], t, types) is not None for t in outputs),
                     "grammar_s": sum(spent), "grammar_steps": len(spent),
                     "grammar_share": sum(spent) / (took["seconds"] - sum(spent)) if spent else 0.0}
    return out


def released_retrieval(texts: list[str], embedder: str, device) -> tuple[float, float]:
    """The released code's search: encode, then scipy cosine for every ordered pair. (encode s, loop s)"""
    from scipy.spatial.distance import cosine
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(embedder, device=str(device))
    encode_s, emb = timed(device, model.encode, texts)
    with clocked(device) as took:
        for i in range(len(emb)):
            scores = [1 - cosine(emb[i], emb[j]) for j in range(len(emb))]
            sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
    return encode_s, took["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="config overrides, e.g. profile=paper_shape device=cuda generator.model=<an S4 folder>")
    parser.add_argument("--sentences", type=int, default=1000, help="sentences for S2 and S3")
    parser.add_argument("--generate", type=int, default=64, help="templates to decode")
    parser.add_argument("--compare", type=int, default=32, help="templates for the released-code generation")
    parser.add_argument("--pairs-n", type=int, default=500, help="sentences for the released-code retrieval")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    cfg = load_config(["profile=tiny", "device=cpu", *args.overrides])
    paper_decoding = load_config(["profile=paper"]).generation
    encoder_name, generator_name = cfg.ner.model, cfg.generator.model
    embedder_name = cfg.generation.mixner.embedder
    device = torch.device(cfg.device)
    sentences = corpus(args.sentences)
    types = sorted(entity_types(sentences))
    figures: dict[str, float] = {}
    encoder = AutoModel.from_pretrained(model_path(encoder_name)).to(device)
    tokenizer = AutoTokenizer.from_pretrained(model_path(encoder_name))
    seconds, (keywords, _, _) = timed(device, extract_keywords, encoder, tokenizer, sentences, cfg.keywords, "en",
                                      device, 1)
    figures["keywords_sentences_per_s"] = len(sentences) / seconds
    del encoder

    model, gen_tok = load_generator(model_path(generator_name), "en", device)
    seconds, templates = timed(device, lambda: [render(dynamic_mask(skeleton(s, k), random.Random(i)),
                                                       gen_tok.mask_token)
                                                for i, (s, k) in enumerate(zip(sentences, keywords))])
    figures["templates_sentences_per_s"] = len(sentences) / seconds

    embedder = model_path(embedder_name)
    for n in (1000, FULL_RETRIEVAL):
        texts = [" ".join(s.tokens) for s in corpus(n)]
        seconds, _ = timed(device, nearest_neighbours, texts, embedder, 2, cfg.generation.mixner.batch_size, device)
        figures[f"retrieval_{n // 1000}k_seconds"] = seconds
        figures[f"retrieval_{n // 1000}k_sentences_per_s"] = n / seconds

    add_label_tokens(model, gen_tok, types, {})
    code = language_code(gen_tok, "en")
    jobs = [Job(i, 0, None, t) for i, t in enumerate(templates[:args.generate])]
    seconds, _ = timed(device, decode_jobs, model, gen_tok, jobs, cfg.generation, label_tokens(types),
                       [code] * len(jobs), 1, device)
    figures["generation_sentences_per_s"] = len(jobs) / seconds

    # --- the released code's approach, same models and data
    compared = templates[:args.compare]
    decoding = OmegaConf.merge(paper_decoding, {"batch_size": cfg.generation.batch_size})
    approaches = usable_comparison(model, gen_tok, sentences[:args.compare], compared, decoding, types, code, device)
    ours, theirs = approaches["off"]["wall_s"], approaches["released"]["wall_s"]
    figures.update(compared=len(compared), generation_ours_s=ours, generation_released_s=theirs,
                   generation_speedup=theirs / ours)
    for name, facts in approaches.items():
        figures.update({f"{name}_{k}": v for k, v in facts.items()})
    encode_s, loop_s = released_retrieval([" ".join(s.tokens) for s in corpus(args.pairs_n)], embedder, device)
    scale = FULL_RETRIEVAL / args.pairs_n
    released_full = encode_s * scale + loop_s * scale ** 2
    figures.update(retrieval_released_encode_s=encode_s, retrieval_released_loop_s=loop_s,
                   retrieval_released_15k_s_extrapolated=released_full,
                   retrieval_speedup_15k=released_full / figures["retrieval_15k_seconds"])

    print(f"device {device}, profile {cfg.profile}: encoder {encoder_name}, generator {generator_name}, "
          f"embedder {embedder_name}")
    for name, value in figures.items():
        print(f"  {name:<40} {value:12.2f}")
    print(f"\nthe released code's approach against ours, same models and data:\n"
          f"  generation, {len(compared)} templates, {paper_decoding.num_beams} beams top-k "
          f"{paper_decoding.top_k} sampling: one pipeline call each {theirs:.1f} s, batched "
          f"{ours:.1f} s: {theirs / ours:.1f}x\n"
          f"  retrieval, {FULL_RETRIEVAL:,} sentences: scipy pairwise loop {released_full:,.0f} s "
          f"(extrapolated from {args.pairs_n}: encode {encode_s:.1f} s, loop {loop_s:.1f} s), ours "
          f"{figures['retrieval_15k_seconds']:.1f} s (measured): {figures['retrieval_speedup_15k']:,.0f}x")
    print(f"\nusable augmentations (well formed, every entity kept, not a copy) of {len(compared)} templates, "
          f"generator {generator_name}:")
    for name, facts in approaches.items():
        what = ("one pipeline call per template; the released rule accepts "
                f"{facts['accepted_released_rule']}" if name == "released" else f"batched, constrained {name}")
        grammar = (f"; the grammar {100 * facts['grammar_share']:.1f}% over the rest of decoding, "
                   f"{1000 * facts['grammar_s'] / facts['grammar_steps']:.2f} ms a step"
                   if facts["grammar_steps"] else "")
        print(f"  {what}: {facts['usable']} usable in {facts['cpu_s']:.1f} CPU s "
              f"= {facts['usable_per_cpu_s']:.2f} a CPU second{grammar}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
