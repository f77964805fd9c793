"""The ACLM stages S2-S6 for one setting, each a cached file-to-file step.

    <run>/<method>/s2_keywords/     train.jsonl dev.jsonl  (keywords + attention scores)
                   s3_templates/    train.jsonl dev.jsonl  (skeletons, a sample template each)
                   s4_generator/    the fine-tuned mBART-50 (from_pretrained folder)
                   s5_generate/     generations.jsonl      (template, output, parse status)
                   s6_postprocess/  aug.conll gold+aug.conll report.json
                   s7_ner/          result.json            (experiment.s7_stage)

S6 is shared with the baselines: any stage that writes ``generations.jsonl``
rows with ``status == "kept"``, ``tokens``, ``tags`` and ``sources`` (indices
of the training sentences it came from) can feed it.
"""

from __future__ import annotations

import logging
import random
import tempfile
from collections import Counter
from pathlib import Path

from omegaconf import DictConfig

from aclm import experiment as ex
from aclm.data import TaggedSentence, read_conll, write_conll
from aclm.diversity import diversity
from aclm.io import read_json, read_jsonl, write_json, write_jsonl
from aclm.postprocess import filter_augmentations
from aclm.runtime import seed_everything, select_device
from aclm.stages import STAMP, run_stage
from aclm.templates import Piece, dynamic_mask, linearize, render, skeleton

log = logging.getLogger("aclm.pipeline")


def stage_dir(cfg: DictConfig, name: str) -> Path:
    return ex.method_dir(cfg) / name


def gold(cfg: DictConfig, split: str) -> list[TaggedSentence]:
    return read_conll(ex.data_dir(cfg) / f"{split}.conll")


# --- S2 ----------------------------------------------------------------------------------

def keywords_stage(cfg: DictConfig, force: bool = False) -> Path:
    from aclm.keywords import NEEDS_ATTENTION, extract_keywords

    s1 = ex.s1_stage(cfg)

    def build(tmp: Path) -> dict:
        device = select_device(cfg.device)
        model = tokenizer = None
        if cfg.keywords.selection in NEEDS_ATTENTION:
            tagger = ex.load_tagger(s1 / "best-model.pt")
            model, tokenizer = tagger.embeddings.model.to(device), tagger.embeddings.tokenizer
        facts = {}
        for split in ("train", "dev"):
            sentences, langs = gold(cfg, split), ex.sentence_languages(cfg, split)
            records: list[dict] = [{} for _ in sentences]
            counts: Counter = Counter()
            for lang in sorted(set(langs)):  # stop words are per language
                index = [i for i, sentence_lang in enumerate(langs) if sentence_lang == lang]
                _, found, found_counts = extract_keywords(model, tokenizer, [sentences[i] for i in index],
                                                          cfg.keywords, lang, device, cfg.seed)
                for i, record in zip(index, found):
                    records[i] = record
                counts.update(found_counts)
            write_jsonl(tmp / f"{split}.jsonl", [{"tokens": s.tokens, "tags": s.tags, **r}
                                                  for s, r in zip(sentences, records)])
            facts[split] = dict(counts)
        return facts

    section = {"keywords": cfg.keywords, "seed": cfg.seed}
    run_stage("s2_keywords", stage_dir(cfg, "s2_keywords"), section, [ex.data_dir(cfg), s1], build, force=force)
    return stage_dir(cfg, "s2_keywords")


# --- S3 ----------------------------------------------------------------------------------

def pieces_to_json(pieces: list[Piece]) -> list[list[str]]:
    return [[p.text, p.tag, p.role] for p in pieces]


def pieces_from_json(rows: list[list[str]]) -> list[Piece]:
    return [Piece(*row) for row in rows]


def mask_token_of(model_name: str) -> str:
    from transformers import AutoTokenizer

    from aclm.config import model_path

    return AutoTokenizer.from_pretrained(model_path(model_name)).mask_token


def templates_stage(cfg: DictConfig, force: bool = False) -> Path:
    s2 = keywords_stage(cfg)

    def build(tmp: Path) -> dict:
        mask = mask_token_of(cfg.generator.model)
        for split in ("train", "dev"):
            rows = []
            for i, r in enumerate(read_jsonl(s2 / f"{split}.jsonl")):
                sentence = TaggedSentence(r["tokens"], r["tags"])
                pieces = skeleton(sentence, r["keywords"])
                rows.append({"tokens": r["tokens"], "tags": r["tags"], "keywords": r["keywords"],
                             "pieces": pieces_to_json(pieces),
                             "target": " ".join(linearize(r["tokens"], r["tags"])),
                             "template": render(pieces, mask),
                             "example": render(dynamic_mask(pieces, random.Random(f"{cfg.seed}:example:{i}")), mask)})
            write_jsonl(tmp / f"{split}.jsonl", rows)
        return {"mask_token": mask}

    section = {"generator_model": cfg.generator.model, "seed": cfg.seed}
    run_stage("s3_templates", stage_dir(cfg, "s3_templates"), section, [s2], build, force=force)
    return stage_dir(cfg, "s3_templates")


def load_templates(s3: Path, split: str) -> tuple[list[list[Piece]], list[str]]:
    rows = read_jsonl(s3 / f"{split}.jsonl")
    return [pieces_from_json(r["pieces"]) for r in rows], [r["target"] for r in rows]


# --- S4 ----------------------------------------------------------------------------------

def generator_stage(cfg: DictConfig, force: bool = False) -> Path:
    from aclm.config import model_path
    from aclm.generator import finetune

    s3 = templates_stage(cfg)

    def build(tmp: Path) -> dict:
        seed_everything(cfg.seed)
        device = select_device(cfg.device)
        gen_cfg = cfg.generator.copy()
        gen_cfg.model = model_path(cfg.generator.model)
        with tempfile.TemporaryDirectory(dir=tmp.parent) as checkpoints:
            languages = {split: ex.sentence_languages(cfg, split) for split in ("train", "dev")}
            return finetune(gen_cfg, load_templates(s3, "train"), load_templates(s3, "dev"), languages,
                            ex.entity_types(cfg), tmp, Path(checkpoints), cfg.seed, device)

    section = {"generator": cfg.generator, "seed": cfg.seed}
    run_stage("s4_generator", stage_dir(cfg, "s4_generator"), section, [s3], build, force=force)
    return stage_dir(cfg, "s4_generator")


# --- S5 ----------------------------------------------------------------------------------

def generate_stage(cfg: DictConfig, force: bool = False) -> Path:
    from aclm import generation as gen
    from aclm.config import model_path
    from aclm.generator import language_code, load_generator
    from aclm.templates import label_tokens

    s4 = generator_stage(cfg)
    s3 = stage_dir(cfg, "s3_templates")

    def build(tmp: Path) -> dict:
        seed_everything(cfg.seed)
        device = select_device(cfg.device)
        rows = read_jsonl(s3 / "train.jsonl")
        skeletons = [pieces_from_json(r["pieces"]) for r in rows]
        g = cfg.generation
        neighbours = [[] for _ in rows]
        if g.mixner.mode != "off":
            k = max(g.mixner.retrieval_k, g.mixner.code_mixed_rounds)
            neighbours = gen.nearest_neighbours([" ".join(r["tokens"]) for r in rows], model_path(g.mixner.embedder),
                                                k, g.mixner.batch_size, device)
        partners = gen.plan_partners(len(rows), neighbours, g.mixner, g.rounds, cfg.seed)
        langs = ex.sentence_languages(cfg, "train")
        model, tokenizer = load_generator(str(s4), langs[0], device)
        jobs = gen.build_jobs(skeletons, partners, tokenizer.mask_token, cfg.seed)
        types = ex.entity_types(cfg)
        codes = {lang: language_code(tokenizer, lang) for lang in set(langs)}
        outputs = gen.decode_jobs(model, tokenizer, jobs, g, label_tokens(types),
                                  [codes[langs[job.source]] for job in jobs], cfg.seed, device)
        screened, counts = gen.screen(jobs, outputs, types)
        truncated = gen.truncated_jobs(tokenizer, jobs, gen.input_limit(model, tokenizer))
        if truncated:
            log.warning("%d of %d templates were longer than the generator accepts and were cut",
                        len(truncated), len(jobs))
        for row in screened:
            row["sources"] = [row["source"]] + ([row["partner"]] if row["partner"] is not None else [])
        write_jsonl(tmp / "generations.jsonl", screened)
        counts["mixed"] = sum(j.partner is not None for j in jobs)
        counts["truncated_inputs"] = len(truncated)
        return counts

    section = {"generation": cfg.generation, "seed": cfg.seed}
    run_stage("s5_generate", stage_dir(cfg, "s5_generate"), section, [s3, s4], build, force=force)
    return stage_dir(cfg, "s5_generate")


# --- S6 (shared) -------------------------------------------------------------------------

def postprocess_stage(cfg: DictConfig, generations: Path, force: bool = False) -> Path:
    """Filter a generation stage's kept rows; write aug.conll, gold+aug.conll and report.json."""
    s1 = ex.s1_dir(cfg)
    inputs = [ex.data_dir(cfg), generations] + ([s1] if cfg.postprocess.consistency_filter else [])

    def build(tmp: Path) -> dict:
        train = gold(cfg, "train")
        rows = [r for r in read_jsonl(generations / "generations.jsonl") if r["status"] == "kept"]
        candidates = [(TaggedSentence(r["tokens"], r["tags"]), [train[i] for i in r.get("sources", [])])
                      for r in rows]
        predict = None
        if cfg.postprocess.consistency_filter:
            select_device(cfg.device)
            tagger = ex.load_tagger(s1 / "best-model.pt")
            predict = lambda sents: ex.predict_tags(tagger, sents, cfg.ner.eval_batch_size)  # noqa: E731
        kept, counts = filter_augmentations(candidates, cfg.postprocess, predict)
        augmentations = [aug for aug, _ in kept]
        write_conll(tmp / "aug.conll", augmentations)
        write_conll(tmp / "gold+aug.conll", train + augmentations)
        with_source = [(sources[0], aug) for aug, sources in kept if sources]
        generated = read_json(generations / STAMP)["facts"]
        attempts = generated.get("generated", counts["candidates"])
        report = {"method": cfg.method, "generation": generated, "postprocess": counts, "gold": len(train),
                  "added": len(augmentations),
                  "dropped_share": round(1 - len(augmentations) / attempts, 4) if attempts else None,
                  "diversity": diversity(with_source) if with_source else None}
        write_json(tmp / "report.json", report)
        return {"added": len(augmentations), **counts}

    out = ex.augmented_dir(cfg)
    run_stage("s6_postprocess", out, {"postprocess": cfg.postprocess}, inputs, build, force=force)
    return out
