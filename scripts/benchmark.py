#!/usr/bin/env python
"""Throughput of the ACLM stages on this machine, and the released code's approach beside ours.

    make bench                                   # = python scripts/benchmark.py (tiny models)
    python scripts/benchmark.py --profile paper_shape --sentences 200 --compare 8
    python scripts/benchmark.py --device cuda --encoder xlm-roberta-large --generator facebook/mbart-large-50 \
        --embedder sentence-transformers/distiluse-base-multilingual-cased-v2

Prints sentences per second for keyword extraction (S2), template building
(S3), retrieval (mixner's similarity search, at 1k and 15k sentences) and
generation (S5).  Then, on the same models and data, the released code's way:

* generation: a ``text2text-generation`` pipeline called once per template
  (5 beams, top-k 10 sampling, up to 100 tokens: the paper's decoding), against
  our batched decoding with the same settings;
* retrieval: scipy's cosine distance over every pair of sentences in a Python
  double loop, timed at ``--pairs-n`` sentences and extrapolated to 15,000
  (N^2 pairs; encoding grows with N), against our search measured at 15,000.

Sentences come from $ACLM_DATA_DIR/multiconer/en when present, else the
bundled sample, repeated.  Models are the profile's unless given.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from aclm.config import load_config, model_path
from aclm.data import TaggedSentence, read_conll
from aclm.datasets import load_split
from aclm.finetuning import add_label_tokens, language_code, load_generator
from aclm.generation import Job, decode_jobs, nearest_neighbours
from aclm.keywords import extract_keywords
from aclm.templates import dynamic_mask, label_tokens, render, skeleton

FULL_RETRIEVAL = 15_000


def corpus(n: int) -> list[TaggedSentence]:
    try:
        sentences = load_split("multiconer/en", "train", None)
    except FileNotFoundError:
        sentences = read_conll(Path("data/sample/en/train.conll"))
    return [sentences[i % len(sentences)] for i in range(n)]


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def released_generation(model, tokenizer, templates: list[str], decoding, code: str, device) -> float:
    """The released code's decoding: one pipeline call per template."""
    from transformers import pipeline

    generate = pipeline("text2text-generation", model=model, tokenizer=tokenizer, device=device)
    generate.generation_config.max_new_tokens = None   # the pipeline's own default (256) would override max_length
    start = time.perf_counter()
    for i, template in enumerate(templates):
        torch.manual_seed(i)
        generate(template, do_sample=True, top_k=decoding.top_k, num_beams=decoding.num_beams,
                 max_length=decoding.max_length, forced_bos_token_id=tokenizer.convert_tokens_to_ids(code))
    return time.perf_counter() - start


def released_retrieval(texts: list[str], embedder: str, device) -> tuple[float, float]:
    """The released code's search: encode, then scipy cosine for every ordered pair. (encode s, loop s)"""
    from scipy.spatial.distance import cosine
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(embedder, device=str(device))
    encode_s, emb = timed(model.encode, texts)
    start = time.perf_counter()
    for i in range(len(emb)):
        scores = [1 - cosine(emb[i], emb[j]) for j in range(len(emb))]
        sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
    return encode_s, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="tiny", help="whose models and batch sizes (default: %(default)s)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--encoder", help="encoder whose attention S2 reads (default: the profile's)")
    parser.add_argument("--generator", help="default: the profile's")
    parser.add_argument("--embedder", help="default: the profile's")
    parser.add_argument("--sentences", type=int, default=1000, help="sentences for S2 and S3")
    parser.add_argument("--generate", type=int, default=64, help="templates to decode")
    parser.add_argument("--compare", type=int, default=32, help="templates for the released-code generation")
    parser.add_argument("--pairs-n", type=int, default=500, help="sentences for the released-code retrieval")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    cfg = load_config([f"profile={args.profile}"])
    paper_decoding = load_config(["profile=paper"]).generation
    encoder_name = args.encoder or cfg.ner.model
    generator_name = args.generator or cfg.generator.model
    embedder_name = args.embedder or cfg.generation.mixner.embedder
    device = torch.device(args.device)
    sentences = corpus(args.sentences)
    types = sorted({t for s in sentences for t in s.entity_types})
    figures: dict[str, float] = {}

    from transformers import AutoModel, AutoTokenizer

    encoder = AutoModel.from_pretrained(model_path(encoder_name)).to(device)
    tokenizer = AutoTokenizer.from_pretrained(model_path(encoder_name))
    seconds, (keywords, _, _) = timed(extract_keywords, encoder, tokenizer, sentences, cfg.keywords, "en", device, 1)
    figures["keywords_sentences_per_s"] = len(sentences) / seconds
    del encoder

    model, gen_tok = load_generator(model_path(generator_name), "en", device)
    seconds, templates = timed(lambda: [render(dynamic_mask(skeleton(s, k), random.Random(i)), gen_tok.mask_token)
                                        for i, (s, k) in enumerate(zip(sentences, keywords))])
    figures["templates_sentences_per_s"] = len(sentences) / seconds

    embedder = model_path(embedder_name)
    for n in (1000, FULL_RETRIEVAL):
        texts = [" ".join(s.tokens) for s in corpus(n)]
        seconds, _ = timed(nearest_neighbours, texts, embedder, 2, cfg.generation.mixner.batch_size, device)
        figures[f"retrieval_{n // 1000}k_seconds"] = seconds
        figures[f"retrieval_{n // 1000}k_sentences_per_s"] = n / seconds

    add_label_tokens(model, gen_tok, types, {})
    code = language_code(gen_tok, "en")
    jobs = [Job(i, 0, None, t) for i, t in enumerate(templates[:args.generate])]
    seconds, _ = timed(decode_jobs, model, gen_tok, jobs, cfg.generation, label_tokens(types), [code] * len(jobs),
                       1, device)
    figures["generation_sentences_per_s"] = len(jobs) / seconds

    # --- the released code's approach, same models and data
    compared = templates[:args.compare]
    decoding = OmegaConf.merge(paper_decoding, {"batch_size": cfg.generation.batch_size})
    ours, _ = timed(decode_jobs, model, gen_tok, [Job(i, 0, None, t) for i, t in enumerate(compared)], decoding,
                    label_tokens(types), [code] * len(compared), 1, device)
    theirs = released_generation(model, gen_tok, compared, paper_decoding, code, device)
    figures.update(generation_ours_s=ours, generation_released_s=theirs, generation_speedup=theirs / ours)
    encode_s, loop_s = released_retrieval([" ".join(s.tokens) for s in corpus(args.pairs_n)], embedder, device)
    scale = FULL_RETRIEVAL / args.pairs_n
    released_full = encode_s * scale + loop_s * scale ** 2
    figures.update(retrieval_released_encode_s=encode_s, retrieval_released_loop_s=loop_s,
                   retrieval_released_15k_s_extrapolated=released_full,
                   retrieval_speedup_15k=released_full / figures["retrieval_15k_seconds"])

    print(f"device {device}, profile {args.profile}: encoder {encoder_name}, generator {generator_name}, "
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
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
