"""S5: generate augmentations from templates, with mixner (SPEC §2 S5).

Each of R rounds draws a fresh dynamic mask per training sentence and decodes it. mixner joins a
sentence's skeleton with a Sentence-BERT neighbour's before masking: ``paper`` mixes when
gamma ~ N(0.5, gamma_sigma) > beta, with a neighbour drawn from the top ``retrieval_k``; ``code`` (the
released schedule) mixes the last ``code_mixed_rounds`` rounds with the nearest in reverse order (2nd, then
1st; R below that: every round mixes, R = 1 with the 2nd nearest); ``off`` never.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from omegaconf import DictConfig
from tqdm.auto import tqdm

from aclm.base.augmentation import GenerationRow
from aclm.steps import screening
from aclm.steps.constraints import MBART_PROMPT, LabelGrammar, TokenClasses, sampling_arguments, template_entities
from aclm.steps.generator import language_code, set_language, target_start
from aclm.steps.labels import PARSERS, UNKNOWN, label_tokens
from aclm.steps.templates import Piece, dynamic_mask, join, render

log = logging.getLogger("aclm.steps.generation")


def nearest_neighbours(texts: Sequence[str], embedder: str, k: int, batch_size: int,
                       device: torch.device) -> list[list[int]]:
    """The ``k`` most cosine-similar other sentences of each sentence, best first."""
    from sentence_transformers import SentenceTransformer, util

    if len(texts) < 2 or k < 1:
        return [[] for _ in texts]
    model = SentenceTransformer(embedder, device=str(device))
    emb = model.encode(list(texts), batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True,
                       show_progress_bar=len(texts) > 1000)
    hits = util.semantic_search(emb, emb, top_k=min(k + 1, len(texts)), score_function=util.dot_score)
    return [[h["corpus_id"] for h in row if h["corpus_id"] != i][:k] for i, row in enumerate(hits)]


@dataclass
class Job:
    source: int
    round: int
    partner: int | None
    template: str


def plan_partners(n: int, neighbours: list[list[int]], cfg: DictConfig, rounds: int, seed: int
                  ) -> list[list[int | None]]:
    """mixner's partner (or None) for every sentence and round."""
    plan = []
    for i in range(n):
        rng = random.Random(f"{seed}:mix:{i}")
        row: list[int | None] = []
        for r in range(rounds):
            partner = None
            if neighbours[i] and cfg.mode == "paper" and rng.gauss(0.5, cfg.gamma_sigma) > cfg.beta:
                partner = rng.choice(neighbours[i][:cfg.retrieval_k])
            elif neighbours[i] and cfg.mode == "code":
                nth = r - max(0, rounds - cfg.code_mixed_rounds)
                order = neighbours[i][:cfg.code_mixed_rounds][::-1]    # the released loop: 2nd nearest, then 1st
                if 0 <= nth < len(order):
                    partner = order[nth]
            row.append(partner)
        plan.append(row)
    return plan


def build_jobs(skeletons: list[list[Piece]], partners: list[list[int | None]], mask_token: str, seed: int
               ) -> list[Job]:
    jobs = []
    for i, row in enumerate(partners):
        for r, partner in enumerate(row):
            pieces = skeletons[i] if partner is None else join(skeletons[i], skeletons[partner])
            masked = dynamic_mask(pieces, random.Random(f"{seed}:gen:{i}:{r}"))
            jobs.append(Job(i, r, partner, render(masked, mask_token)))
    return jobs


def decode_keeping_labels(tokenizer, ids: Sequence[int], keep_ids: set[int]) -> str:
    """Decode, keeping ``keep_ids`` (label tokens, mask) as separate words (a kept unknown as ``<unk>``)
    and dropping other special tokens; segments decode apart, so no label token is glued to a word."""
    words, segment = [], []
    for i in ids:
        if i in keep_ids:
            words.append(tokenizer.decode(segment, skip_special_tokens=True).strip())
            words.append(UNKNOWN if i == tokenizer.unk_token_id else tokenizer.convert_ids_to_tokens(i))
            segment = []
        else:
            segment.append(i)
    words.append(tokenizer.decode(segment, skip_special_tokens=True).strip())
    return " ".join(w for w in words if w)


def batches(jobs: list[Job], codes: Sequence[str], size: int) -> list[list[int]]:
    """Job indices in batches of one language each, longest templates first to limit padding."""
    order = sorted(range(len(jobs)), key=lambda j: (codes[j], -len(jobs[j].template), j))
    out: list[list[int]] = []
    for j in order:
        if out and len(out[-1]) < size and codes[out[-1][0]] == codes[j]:
            out[-1].append(j)
        else:
            out.append([j])
    return out


def input_limit(model, tokenizer) -> int:
    """The most input tokens the generator accepts (position table or tokenizer limit).  Templates are cut
    only here, not at ``generation.max_length`` (the output's bound): a mixner template is about twice as long."""
    limits = [getattr(model.config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)]
    return min(n for n in limits if n and n < 1_000_000)


def truncated_jobs(tokenizer, jobs: list[Job], limit: int) -> list[int]:
    """Indices of the jobs whose template is longer than ``limit`` tokens (and is cut there)."""
    lengths = [len(ids) for ids in tokenizer([job.template for job in jobs])["input_ids"]] if jobs else []
    return [j for j, n in enumerate(lengths) if n > limit]


def grammar(tokenizer, classes: TokenClasses | None, templates: Sequence[str], label_tokens: Sequence[str],
            cfg: DictConfig) -> LabelGrammar | None:
    """The ``generation.constrained`` processor for one batch of templates (None when ``off``)."""
    if classes is None:
        return None
    entities = None
    if cfg.constrained == "entities":
        entities = [[tokenizer(e, add_special_tokens=False)["input_ids"] for e in template_entities(t, label_tokens)]
                    for t in templates]
    return LabelGrammar(classes, entities=entities, group_size=cfg.num_beams, prompt_length=MBART_PROMPT,
                        max_length=cfg.max_length)


@torch.inference_mode()
def decode_jobs(model, tokenizer, jobs: list[Job], cfg: DictConfig, label_tokens: Sequence[str],
                codes: Sequence[str], seed: int, device: torch.device) -> tuple[list[str], list[int]]:
    """Generate one sequence per job, batched by language code; returns the texts and the jobs that
    reached ``cfg.max_length`` (possibly cut).  ``constrained=off`` calls ``generate`` as the paper does;
    without ``force_first_token`` the model writes the language code itself, as the released dynamic mode."""
    # an unfilled mask and (strict reading) an <unk> stay visible, so parsing rejects the generation
    # (the released reading drops an <unk> with the other special tokens)
    keep_ids = set(tokenizer.convert_tokens_to_ids(list(label_tokens))) | {tokenizer.mask_token_id}
    if cfg.parse == "strict" and tokenizer.unk_token_id is not None:
        keep_ids.add(tokenizer.unk_token_id)
    classes = TokenClasses.of(tokenizer, label_tokens) if cfg.constrained != "off" else None
    outputs: list[str] = [""] * len(jobs)
    at_limit: list[int] = []
    limit = input_limit(model, tokenizer)
    model.eval()
    for b, batch in enumerate(tqdm(batches(jobs, codes, cfg.batch_size), desc="generate", unit="batch")):
        set_language(tokenizer, codes[batch[0]])
        templates = [jobs[j].template for j in batch]
        enc = tokenizer(templates, return_tensors="pt", padding=True, truncation=True, max_length=limit).to(device)
        sampling = sampling_arguments(grammar(tokenizer, classes, templates, label_tokens, cfg), cfg.top_k,
                                      cfg.num_beams)
        torch.manual_seed(seed + b)
        generated = model.generate(**enc, do_sample=True, num_beams=cfg.num_beams, max_length=cfg.max_length,
                                   forced_bos_token_id=(target_start(tokenizer)
                                                        if cfg.force_first_token else None),
                                   num_return_sequences=1, **sampling)
        full = generated.shape[1] >= cfg.max_length
        for j, ids in zip(batch, generated.tolist()):
            outputs[j] = decode_keeping_labels(tokenizer, ids, keep_ids)
            if full and ids[-1] != tokenizer.pad_token_id:       # finished rows are padded to the longest
                at_limit.append(j)
    return outputs, sorted(at_limit)


def screen(jobs: list[Job], outputs: list[str], types: Sequence[str], parse: str = "strict",
           dedupe: str = "parsed", cut: Sequence[int] = ()) -> tuple[list[GenerationRow], dict]:
    """Parse every output via :func:`aclm.steps.screening.screen`, dropping malformed ones and repeats;
    jobs in ``cut`` are ``malformed_truncated``. Copies of the source are left to S6. ``sources``: the
    source, then mixner's partner."""
    reader = PARSERS[parse]
    cut_texts = {outputs[j] for j in cut}      # a text is cut if any job that wrote it reached the limit

    def read(text: str):
        if text in cut_texts:
            raise screening.MalformedGeneration("truncated", "reached generation.max_length")
        return reader(text, types)

    screened, counts = screening.screen([job.source for job in jobs], outputs, read, dedupe=dedupe)
    rows = []
    for job, text, verdict in zip(jobs, outputs, screened):
        row: GenerationRow = {"source": job.source, "round": job.round, "partner": job.partner,
                              "template": job.template, "generation": text, "status": verdict.status}
        if verdict.status == screening.KEPT:
            row["tokens"], row["tags"] = verdict.sentence.tokens, verdict.sentence.tags
        row["sources"] = [job.source] + ([job.partner] if job.partner is not None else [])
        rows.append(row)
    return rows, counts


def generate_split(load_generator: Callable[[], tuple], skeletons: Sequence[Sequence[Piece]],
                   tokens: Sequence[Sequence[str]], languages: Sequence[str], types: Sequence[str], g: DictConfig,
                   embedder: str | None, seed: int, device) -> tuple[list[GenerationRow], dict]:
    """S5 over the training split (``embedder`` None: mixner off).  ``load_generator`` is called after
    partners are planned, so the retrieval model and the generator are never held at once."""
    neighbours: list[list[int]] = [[] for _ in skeletons]
    if embedder is not None:
        k = max(g.mixner.retrieval_k, g.mixner.code_mixed_rounds)
        neighbours = nearest_neighbours([" ".join(t) for t in tokens], embedder, k, g.mixner.batch_size, device)
    partners = plan_partners(len(skeletons), neighbours, g.mixner, g.rounds, seed)
    model, tokenizer = load_generator()
    jobs = build_jobs(skeletons, partners, tokenizer.mask_token, seed)
    codes = {language: language_code(tokenizer, language) for language in set(languages)}
    decoded, at_limit = decode_jobs(model, tokenizer, jobs, g, label_tokens(types),
                                    [codes[languages[job.source]] for job in jobs], seed, device)
    screened, counts = screen(jobs, decoded, types, g.parse, g.dedupe, at_limit if g.at_limit == "drop" else ())
    if at_limit:
        log.warning("%d of %d generations reached generation.max_length=%d (%s)", len(at_limit), len(jobs),
                    g.max_length, "dropped as malformed_truncated" if g.at_limit == "drop" else "kept: at_limit=keep")
    truncated = truncated_jobs(tokenizer, jobs, input_limit(model, tokenizer))
    if truncated:
        log.warning("%d of %d templates were longer than the generator accepts and were cut", len(truncated),
                    len(jobs))
    counts["mixed"] = sum(job.partner is not None for job in jobs)
    counts["truncated_inputs"] = len(truncated)
    counts["at_length_limit"] = len(at_limit)
    return screened, counts
