"""S3: selective masking templates from S2's keywords (``s3_templates/{train,dev}.jsonl``)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from aclm.base.io import write_jsonl
from aclm.base.models import load_path
from aclm.stages import layout, outputs
from aclm.stages.declare import stage
from aclm.steps.templates import templates_of_split


def mask_token_of(model_name: str) -> str:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(load_path(model_name)).mask_token


@stage(layout.S3, keys=("generator.model", "seed"))
def templates_stage(c: DictConfig, out: Path, s2_keywords: Path) -> dict:
    mask = mask_token_of(c.generator.model)
    for split in layout.SPLITS:
        write_jsonl(out / layout.rows_file(split), templates_of_split(outputs.keyword_rows(s2_keywords, split),
                                                                     mask, c.seed))
    return {"mask_token": mask}
