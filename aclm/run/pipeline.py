"""The augmentation stages, each a declared stage (:func:`aclm.run.stages.stage`): ACLM's S2-S5, a
baseline's one ``augment`` stage, and the S6 every method shares.

Each takes the directories of the stages it reads as arguments; each
method's chain, which calls them in order, is :mod:`aclm.run.chain`.

    s2_keywords/     train.jsonl dev.jsonl  (keywords + attention scores)
    s3_templates/    train.jsonl dev.jsonl  (skeletons, a sample template each)
    s4_generator/    the fine-tuned mBART-50 (from_pretrained folder)
    s5_generation/     generations.jsonl      (template, output, parse status)
    augment/         generations.jsonl      (a baseline's, from its ``augment(cfg, gold)``)
    s6_postprocess/  aug.conll gold+aug.conll report.json

S6 reads any generation stage's rows (:class:`aclm.base.augmentation.GenerationRow`):
``status``, and of a kept row ``tokens``, ``tags`` and ``sources`` (indices of
the training sentences it came from).  The training libraries (flair,
transformers) are imported where a stage builds, not with this module: a
chain is planned (the grids, the tables) without them.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from aclm.base import registry
from aclm.base.augmentation import Gold, NoAugmentation
from aclm.base.config import model_path
from aclm.base.data import TaggedSentence, split_at_commas, write_conll
from aclm.base.datasets import get_spec
from aclm.base.io import write_json, write_jsonl
from aclm.base.runtime import seed_everything, select_device
from aclm.run import layout, outputs
from aclm.run.stages import stage
from aclm.steps.diversity import diversity
from aclm.steps.postprocess import filter_augmentations
from aclm.steps.templates import Piece, pieces_from_json, templates_of_split

log = logging.getLogger("aclm.run.pipeline")


def generator_view(sentences: list[TaggedSentence], split_commas: bool) -> list[TaggedSentence]:
    """The gold sentences S2-S5 work on: as they are, or with tokens split at commas (``keywords.split_commas``,
    the released S2 reader; S1 and the gold part of S6's output keep the tokens as given)."""
    return [split_at_commas(s) for s in sentences] if split_commas else sentences


def gold_tagger(s1: Path):
    """The S1 tagger, loaded (S2 reads its encoder's attention; S6's consistency filter, its predictions)."""
    from aclm.steps.tagger import load_tagger

    return load_tagger(outputs.tagger_model(s1))


# --- S2 ----------------------------------------------------------------------------------

@stage(layout.S2, keys=("keywords", "seed"), loads=(layout.S1,))
def keywords_stage(c: DictConfig, out: Path, data: Path, s1_ner: Path) -> dict:
    from aclm.steps.keywords import NEEDS_ATTENTION, keywords_of_split

    device = select_device(c.device)
    model = tokenizer = None
    if c.keywords.selection in NEEDS_ATTENTION:
        tagger = gold_tagger(s1_ner)
        model, tokenizer = tagger.embeddings.model.to(device), tagger.embeddings.tokenizer
    facts = {}
    for split in layout.SPLITS:
        sentences = generator_view(outputs.gold(data, split), c.keywords.split_commas)
        records, counts = keywords_of_split(model, tokenizer, sentences, outputs.sentence_languages(data, split),
                                            c.keywords, device, c.seed)
        write_jsonl(out / layout.rows_file(split), [{"tokens": s.tokens, "tags": s.tags, **r}
                                             for s, r in zip(sentences, records)])
        facts[split] = dict(counts)
    return facts


# --- S3 ----------------------------------------------------------------------------------

def mask_token_of(model_name: str) -> str:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path(model_name)).mask_token


@stage(layout.S3, keys=("generator.model", "seed"))
def templates_stage(c: DictConfig, out: Path, s2_keywords: Path) -> dict:
    mask = mask_token_of(c.generator.model)
    for split in layout.SPLITS:
        write_jsonl(out / layout.rows_file(split), templates_of_split(outputs.keyword_rows(s2_keywords, split),
                                                                     mask, c.seed))
    return {"mask_token": mask}


# --- S4 ----------------------------------------------------------------------------------

def skeletons_and_targets(s3: Path, split: str) -> tuple[list[list[Piece]], list[str]]:
    """S3's skeletons and linearized targets of ``split``, as the generator is fine-tuned on them."""
    rows = outputs.template_rows(s3, split)
    return [pieces_from_json(r["pieces"]) for r in rows], [r["target"] for r in rows]


@stage(layout.S4, keys=("generator", "seed"))
def generator_stage(c: DictConfig, out: Path, data: Path, s3_templates: Path) -> dict:
    from aclm.steps.generator import finetune

    seed_everything(c.seed)
    device = select_device(c.device)
    gen_cfg = OmegaConf.merge(c.generator, {"model": model_path(c.generator.model)})
    # the trainer's output folder, which it needs though it writes no checkpoint there (the best weights stay in
    # memory); beside the scratch folder and named like it, so that a killed run's is removed as its orphan
    with tempfile.TemporaryDirectory(prefix=f".{layout.S4}.trainer.", suffix=".tmp", dir=out.parent) as trainer_dir:
        languages = {split: outputs.sentence_languages(data, split) for split in layout.SPLITS}
        return finetune(gen_cfg, skeletons_and_targets(s3_templates, "train"),
                        skeletons_and_targets(s3_templates, "dev"), languages,
                        outputs.entity_types(data), out, Path(trainer_dir), c.seed, device)


# --- S5 ----------------------------------------------------------------------------------

@stage(layout.S5, keys=("generation", "seed"), loads=(layout.S4,))
def generation_stage(c: DictConfig, out: Path, data: Path, s3_templates: Path, s4_generator: Path) -> dict:
    from aclm.steps.generator import load_generator
    from aclm.steps.generation import generate_split

    seed_everything(c.seed)
    device = select_device(c.device)
    rows = outputs.template_rows(s3_templates, "train")
    languages = outputs.sentence_languages(data, "train")
    embedder = model_path(c.generation.mixner.embedder) if c.generation.mixner.mode != "off" else None
    screened, counts = generate_split(lambda: load_generator(str(s4_generator), languages[0], device),
                                      [pieces_from_json(r["pieces"]) for r in rows], [r["tokens"] for r in rows],
                                      languages, outputs.entity_types(data), c.generation, embedder, c.seed, device)
    write_jsonl(out / layout.GENERATIONS, screened)
    return counts


# --- a baseline's augment stage ----------------------------------------------------------

def augment_keys(method: registry.Method) -> tuple[str, ...]:
    """The config keys a baseline's augment stage reads: the method table's, and what names the run."""
    return ("method", "dataset", "seed", *method.keys)


def augment_stage(cfg: DictConfig, data: Path, needs: tuple[Path, ...] = (), force: bool = False) -> Path:
    """A baseline's one generation stage: its ``augment(cfg, gold)`` from the method table.

    ``needs`` are the S6 directories of the methods it needs (``Method.needs``) that ran: their
    reports reach the method as ``gold.needs``.
    """
    method = registry.get(cfg.method)

    @stage(layout.AUGMENT, keys=augment_keys(method), files=method.input_files(),
           code=method.code_modules())
    def augment(c: DictConfig, out: Path, data: Path, needs: tuple[Path, ...]) -> dict:
        seed_everything(c.seed)
        gold = Gold(outputs.gold(data, "train"), outputs.gold(data, "dev"), outputs.entity_types(data),
                    get_spec(c.dataset).language, outputs.sentence_languages(data, "train"),
                    outputs.sentence_languages(data, "dev"), select_device(c.device), out,
                    {d.parent.name: outputs.augmentation_report(d) for d in needs})
        rows, counts = method.augmenter()(c, gold)
        write_jsonl(out / layout.GENERATIONS, rows)
        return counts

    return augment(cfg, force=force, data=data, needs=tuple(needs))


# --- S6 (shared) -------------------------------------------------------------------------

def nothing_added(c: DictConfig, kept: int, counts: dict) -> str:
    """S6 kept no augmentation: fail (``postprocess.on_nothing_added=fail``), or the warning its report
    and the run's result carry."""
    message = (f"{c.method}: S6 kept none of {kept} generations ({', '.join(f'{k} {v}' for k, v in counts.items())}):"
               f" its S7 is Gold-only's tagger, not an augmented one")
    if c.postprocess.on_nothing_added == "fail":
        raise NoAugmentation(message + "; the run stops here (postprocess.on_nothing_added=warn lets it finish,"
                                       " flagged)")
    log.warning(message)
    return message


@stage(layout.S6, keys=("method", "postprocess", "ner.eval_batch_size"), loads=(layout.S1,))
def postprocess_stage(c: DictConfig, out: Path, data: Path, generations: Path, s1_ner: Path | None = None) -> dict:
    """Filter a generation stage's kept rows (S5's, or a baseline's augment stage's); write aug.conll,
    gold+aug.conll and report.json.

    ``s1_ner`` (the gold tagger) is passed when the consistency filter is on.
    """
    train = outputs.gold(data, "train")
    rows = [r for r in outputs.generations(generations) if r["status"] == "kept"]
    candidates = [(TaggedSentence(r["tokens"], r["tags"]), [train[i] for i in r.get("sources", [])])
                  for r in rows]
    predict = None
    if c.postprocess.consistency_filter:
        from aclm.steps.tagger import predict_tags

        select_device(c.device)
        tagger = gold_tagger(s1_ner)
        predict = lambda sents: predict_tags(tagger, sents, c.ner.eval_batch_size)  # noqa: E731
    kept, counts = filter_augmentations(candidates, c.postprocess, predict)
    augmentations = [aug for aug, _ in kept]
    warning = None if augmentations else nothing_added(c, len(rows), counts)
    write_conll(out / layout.AUG, augmentations)
    write_conll(out / layout.GOLD_AUG, train + augmentations)
    with_source = [(sources[0], aug) for aug, sources in kept if sources]
    generated = outputs.generation_facts(generations)
    attempts = generated.get("generated", counts["candidates"])
    report = {"method": c.method, "generation": generated, "postprocess": counts, "gold": len(train),
              "added": len(augmentations),
              "dropped_share": round(1 - len(augmentations) / attempts, 4) if attempts else None,
              "diversity": diversity(with_source) if with_source else None,
              **({"warning": warning} if warning else {})}
    write_json(out / layout.REPORT, report)
    return {"added": len(augmentations), **counts}
