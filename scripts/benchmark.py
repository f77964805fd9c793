#!/usr/bin/env python
"""Throughput of the ACLM stages on this machine (tiny models by default).

    make bench                                   # = python scripts/benchmark.py
    python scripts/benchmark.py --device cuda --encoder xlm-roberta-large --generator facebook/mbart-large-50 \
        --embedder sentence-transformers/distiluse-base-multilingual-cased-v2

Prints sentences per second for keyword extraction (S2), template building
(S3), retrieval (mixner's similarity search) and generation (S5), and the
retrieval time for 1k and 15k sentences. Sentences come from
$ACLM_DATA_DIR/multiconer/en when present, else the bundled sample, repeated.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from aclm.config import load_config, model_path
from aclm.data import TaggedSentence, read_conll
from aclm.datasets import load_split
from aclm.generation import Job, decode_jobs, nearest_neighbours
from aclm.finetuning import language_code, load_generator
from aclm.keywords import extract_keywords
from aclm.templates import dynamic_mask, label_tokens, render, skeleton


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tiny = load_config(["profile=tiny"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--encoder", default=tiny.ner.model, help="encoder whose attention S2 reads")
    parser.add_argument("--generator", default=tiny.generator.model)
    parser.add_argument("--embedder", default=tiny.generation.mixner.embedder)
    parser.add_argument("--sentences", type=int, default=1000, help="sentences for S2 and S3")
    parser.add_argument("--generate", type=int, default=64, help="templates to decode")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    device = torch.device(args.device)
    cfg = load_config(["profile=tiny"])
    sentences = corpus(args.sentences)
    types = sorted({t for s in sentences for t in s.entity_types})
    figures: dict[str, float] = {}

    from transformers import AutoModel, AutoTokenizer

    encoder = AutoModel.from_pretrained(model_path(args.encoder)).to(device)
    tokenizer = AutoTokenizer.from_pretrained(model_path(args.encoder))
    seconds, (keywords, _, _) = timed(extract_keywords, encoder, tokenizer, sentences, cfg.keywords, "en", device, 1)
    figures["keywords_sentences_per_s"] = len(sentences) / seconds

    model, gen_tok = load_generator(model_path(args.generator), "en", device)
    seconds, templates = timed(lambda: [render(dynamic_mask(skeleton(s, k), random.Random(i)), gen_tok.mask_token)
                                        for i, (s, k) in enumerate(zip(sentences, keywords))])
    figures["templates_sentences_per_s"] = len(sentences) / seconds

    for n in (1000, 15000):
        texts = [" ".join(s.tokens) for s in corpus(n)]
        seconds, _ = timed(nearest_neighbours, texts, model_path(args.embedder), 2, 256, device)
        figures[f"retrieval_{n // 1000}k_seconds"] = seconds
        figures[f"retrieval_{n // 1000}k_sentences_per_s"] = n / seconds

    from aclm.finetuning import add_label_tokens

    add_label_tokens(model, gen_tok, types, {})
    jobs = [Job(i, 0, None, t) for i, t in enumerate(templates[:args.generate])]
    seconds, _ = timed(decode_jobs, model, gen_tok, jobs, cfg.generation, label_tokens(types),
                       [language_code(gen_tok, "en")] * len(jobs), 1, device)
    figures["generation_sentences_per_s"] = len(jobs) / seconds

    print(f"device {device}, encoder {args.encoder}, generator {args.generator}, embedder {args.embedder}")
    for name, value in figures.items():
        print(f"  {name:<32} {value:10.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
