"""What the HF Trainers here (ACLM's and MulDA's generator, MELM's masked LM) share: precision, best checkpoint."""

from __future__ import annotations

import torch


def precision_flags(mode: str, device: torch.device) -> dict:
    if device.type != "cuda" or mode == "no":
        return {}
    if mode == "auto":
        mode = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return {mode: True}


def best_evaluation(trainer) -> dict:
    """The logged evaluation with the lowest dev loss (its ``epoch`` says when the kept model was saved)."""
    return min((e for e in trainer.state.log_history if "eval_loss" in e), key=lambda e: e["eval_loss"])
