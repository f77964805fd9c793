"""Trainable parameters a method's run fine-tunes, counted from the models' configs (no weights loaded).

Counted: the tagger's encoder, a generating method's pretrained generator, a fine-tuned GLiNER (an ``encoder:``
one as its encoder; a pretrained one is unknown).  The LLM method's model is prompted, not trained, and named so.
Models are built on the ``meta`` device from local configs (none here: unknown), so counting costs no memory and
no download.  The tagger's linear head and DAGA's own LSTM are left out, and said to be.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

from aclm.base import registry
from aclm.base.dicts import flatten
from aclm.base.models import load_path


#: Config sections whose model a run prompts and never trains (the LLM method's): counted, and said to be.
PROMPTED = ("llm",)


@lru_cache(maxsize=None)
def model_parameters(name: str) -> int | None:
    """Parameters of the model ``name`` (a hub id, folder or ``pkg:`` name) as built from its config alone."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

    try:       # a GLiNER over an encoder counts as that encoder; a pretrained GLiNER has no transformers config
        config = AutoConfig.from_pretrained(load_path(name.removeprefix("encoder:")), local_files_only=True)
    except (OSError, ValueError):
        return None
    kind = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModel
    with torch.device("meta"):
        model = kind.from_config(config)
    return sum(p.numel() for p in model.parameters())


def trained_models(method: str, config: Mapping) -> dict[str, str]:
    """What a run of ``method`` fine-tunes, by role -> model name, from its config (result.json's)."""
    keys = flatten(dict(config))
    entry = registry.get(method.split("@")[0])
    if entry.tagger != "flair":               # a span tagger: GLiNER fine-tuned, or zero-shot (nothing trained)
        return {"span tagger": keys["gliner.model"]} if entry.tagger == "gliner" and "gliner.model" in keys else {}
    models = {"tagger": keys.get("ner.model")}
    for section in (entry.generator, *(k.split(".")[0] for k in entry.keys)):
        if section and f"{section}.model" in keys:
            models[section + " (prompted)" * (section in PROMPTED)] = keys[f"{section}.model"]
    return {role: name for role, name in models.items() if name}


def in_millions(count: int | None) -> str:
    return "unknown" if count is None else f"{count / 1e6:.1f}M"


def parameters_line(method: str, config: Mapping) -> str:
    """``tagger all-MiniLM 22.7M + generator mbart 7.7M``: what one run of ``method`` trains."""
    models = trained_models(method, config)
    parts = [f"{role} {in_millions(model_parameters(str(name)))}" for role, name in models.items()]
    return (" + ".join(parts) or "none (zero-shot)") + (" + its LSTM" if method.split("@")[0] == "daga" else "")
