"""MELM as a baseline: seeds (gold, plus code-mixed copies with ``melm.code_mix``), fine-tune the masked
LM on them with entity tokens masked at rate eta, then ``melm.rounds`` re-mask-and-fill passes per seed.

The consistency filter (keep what the gold NER reproduces) is S6's (``configs/methods/melm.yaml``).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from omegaconf import DictConfig

from aclm.base.augmentation import Gold
from aclm.base.runtime import Timings, seed_everything
from melm.codemix import code_mix, sbert_embedder
from melm.encoding import Seed, encode, load_mlm
from melm.generation import fill_jobs, plan_jobs, read_all, screen
from melm.sources import load_code_mix_pool
from melm.training import finetune, training_features

log = logging.getLogger("melm")


def code_mixed_seeds(cfg: DictConfig, gold: Gold) -> tuple[list[Seed], list[str]]:
    """Code-mixed copies of the gold sentences and the languages they borrow from.  Monolingual gold borrows
    from ``melm.code_mix_languages``; multilingual gold from the other languages' gold, as MELM's setting."""
    if not cfg.melm.code_mix:
        return [], []
    embed = sbert_embedder(cfg, gold.device)
    by_language: dict[str, list[int]] = {}
    for i, lang in enumerate(gold.languages):
        by_language.setdefault(lang, []).append(i)
    if len(by_language) == 1:
        pool = load_code_mix_pool(list(cfg.melm.code_mix_languages), cfg.data_dir, gold.language)
        return code_mix(gold.train, pool, embed, cfg.seed), sorted(pool)
    seeds = []
    for lang, index in sorted(by_language.items()):
        pool = {other: [gold.train[i] for i in rows] for other, rows in by_language.items() if other != lang}
        mixed = code_mix([gold.train[i] for i in index], pool, embed, cfg.seed)
        seeds += [replace(seed, source=index[seed.source]) for seed in mixed]
    return seeds, sorted(by_language)


def augment(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    """Kept MELM generations as rows, with counts of everything generated, dropped and timed."""
    m = cfg.melm
    timings = Timings()
    seed_everything(cfg.seed)
    with timings.step("melm_code_mix"):
        mixed, languages = code_mixed_seeds(cfg, gold)
    seeds = [Seed(s, i) for i, s in enumerate(gold.train)] + mixed
    model, tokenizer = load_mlm(m.model, gold.types, cfg.generator.label_token_init, languages)
    encoded = [encode(s.sentence, tokenizer, s.markers) for s in seeds]
    dev = [encode(s, tokenizer) for s in gold.dev]
    with timings.step("melm_finetune"):
        facts = finetune(model, tokenizer, training_features(encoded), training_features(dev), m, cfg.seed,
                         gold.device, gold.work_dir / "melm-checkpoints")
    with timings.step("melm_generate"):
        jobs = plan_jobs(encoded, m.rounds, cfg.seed)
        filled = fill_jobs(model, tokenizer, encoded, jobs, m.top_k, m.batch_size, cfg.seed, gold.device)
        generated = read_all(seeds, encoded, jobs, filled, tokenizer, gold.types)
    rows, counts = screen(seeds, gold.train, jobs, generated)
    counts = {**counts, "code_mixed": len(mixed), "skipped_too_long": sum(not e.complete for e in encoded),
              **facts, "timings": dict(timings)}
    log.info("MELM: %d of %d generations kept (%s)", counts["kept"], counts["generated"], counts)
    return rows, counts

