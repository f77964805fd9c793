"""One progress bar per Hugging Face training run, with the last training and dev loss.

Replaces the Trainer's printed log dicts; flair's tagger has :class:`aclm.steps.ner.EpochProgress`.
"""

from __future__ import annotations

from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback


class StepProgress(TrainerCallback):
    """A bar over optimizer steps, the last losses in its postfix."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar: tqdm | None = None
        self.losses: dict[str, float] = {}

    def on_train_begin(self, args, state, control, **kwargs):
        self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc=self.desc, unit="step",
                        dynamic_ncols=True)

    def on_step_end(self, args, state, control, **kwargs):
        self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key, name in (("loss", "loss"), ("eval_loss", "dev loss")):
            if logs and key in logs:
                self.losses[name] = logs[key]
        if self.bar is not None and self.losses:
            self.bar.set_postfix_str(", ".join(f"{k} {v:.4f}" for k, v in self.losses.items()))

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()


def show_progress(trainer: Trainer, desc: str) -> Trainer:
    """Replace the trainer's printed log dictionaries and its own bar by a :class:`StepProgress`."""
    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)
    trainer.add_callback(StepProgress(desc))
    return trainer
