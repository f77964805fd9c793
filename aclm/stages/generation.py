"""S5: generation from dynamic masks, with mixner (``s5_generation/generations.jsonl``)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from aclm.base.io import write_jsonl
from aclm.base.models import load_path
from aclm.base.runtime import seed_everything, select_device
from aclm.stages import layout, outputs
from aclm.stages.declare import stage
from aclm.steps.templates import pieces_from_json


@stage(layout.S5, keys=("generation", "seed"), loads=(layout.S4,))
def generation_stage(c: DictConfig, out: Path, data: Path, s3_templates: Path, s4_generator: Path) -> dict:
    from aclm.steps.generation import generate_split
    from aclm.steps.generator import load_generator

    seed_everything(c.seed)
    device = select_device(c.device)
    rows = outputs.template_rows(s3_templates, "train")
    languages = outputs.sentence_languages(data, "train")
    embedder = load_path(c.generation.mixner.embedder) if c.generation.mixner.mode != "off" else None
    screened, counts = generate_split(lambda: load_generator(str(s4_generator), languages[0], device),
                                      [pieces_from_json(r["pieces"]) for r in rows], [r["tokens"] for r in rows],
                                      languages, outputs.entity_types(data), c.generation, embedder, c.seed, device)
    write_jsonl(out / layout.GENERATIONS, screened)
    return counts
