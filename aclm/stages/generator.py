"""S4: the generator fine-tuned on S3's templates (``s4_generator/``, a ``from_pretrained`` folder)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from aclm.base.models import load_path
from aclm.base.runtime import seed_everything, select_device
from aclm.stages import layout, outputs
from aclm.stages.declare import stage
from aclm.steps.templates import Piece, pieces_from_json


def skeletons_and_targets(s3: Path, split: str) -> tuple[list[list[Piece]], list[str]]:
    """S3's skeletons and linearized targets of ``split``, as the generator is fine-tuned on them."""
    rows = outputs.template_rows(s3, split)
    return [pieces_from_json(r["pieces"]) for r in rows], [r["target"] for r in rows]


@stage(layout.S4, keys=("generator", "seed"))
def generator_stage(c: DictConfig, out: Path, data: Path, s3_templates: Path) -> dict:
    from aclm.steps.generator import finetune

    seed_everything(c.seed)
    device = select_device(c.device)
    gen_cfg = OmegaConf.merge(c.generator, {"model": load_path(c.generator.model)})
    # the trainer's output folder, which it needs though it writes no checkpoint there (the best weights stay in
    # memory); beside the scratch folder and named like it, so that a killed run's is removed as its orphan
    with tempfile.TemporaryDirectory(prefix=f".{layout.S4}.trainer.", suffix=".tmp", dir=out.parent) as trainer_dir:
        languages = {split: outputs.sentence_languages(data, split) for split in layout.SPLITS}
        return finetune(gen_cfg, skeletons_and_targets(s3_templates, "train"),
                        skeletons_and_targets(s3_templates, "dev"), languages,
                        outputs.entity_types(data), out, Path(trainer_dir), c.seed, device)
