"""S1 and S7: a tagger trained on the gold data (``s1_ner/``) or on gold + augmentations (``s7_ner/``).

Scoring is a stage of its own (:mod:`aclm.stages.scores`), so an edited test set re-scores without re-training.
flair loads only where a tagger trains or predicts, so planning a chain (grids, tables) never imports it.
"""

from __future__ import annotations

from pathlib import Path

from aclm.base.data import TaggedSentence, check_label_sets
from aclm.base.io import atomic_write_text
from aclm.base.runtime import seed_everything, select_device
from aclm.stages import layout, outputs
from aclm.stages.declare import stage


def train(c, out: Path, data: Path, sentences: list[TaggedSentence]) -> dict:
    """Train on ``sentences`` (dev from the data stage); fail when the tagger learned nothing."""
    from aclm.steps.ner import check_learned, load_tagger, train_tagger

    seed_everything(c.seed)
    select_device(c.device)
    dev = outputs.gold(data, "dev")
    types = check_label_sets({"train": sentences, "dev": dev})
    model, training = train_tagger(c.ner, sentences, dev, types, out)
    tagger = load_tagger(model)
    dev_scores, dev_predicted = evaluate_on(tagger, dev, c.ner.eval_batch_size, None)
    check_learned(dev_scores["f1"], dev_predicted, c.ner, out)
    return {"train": len(sentences), "dev": len(dev), "dev_f1": dev_scores["f1"], "types": types,
            "training": training}


@stage(layout.S1, keys=("ner", "seed"))
def s1_stage(c, out: Path, data: Path) -> dict:
    return train(c, out, data, outputs.gold(data, "train"))


@stage(layout.S7, keys=("ner", "seed"))
def s7_stage(c, out: Path, data: Path, s6_postprocess: Path) -> dict:
    return train(c, out, data, outputs.gold_and_augmentations(s6_postprocess))


def evaluate_on(tagger, sentences: list[TaggedSentence], batch_size: int, predictions_file: Path | None
                ) -> tuple[dict, list[list[str]]]:
    """Scores on ``sentences`` and the predicted tags (with a progress bar when the predictions are kept)."""
    from aclm.base.metrics import evaluate_tags     # seqeval loads scikit-learn: imported where scores are made
    from aclm.steps.ner import predict_tags

    predicted = predict_tags(tagger, sentences, batch_size, progress=predictions_file is not None)
    if predictions_file is not None:
        lines = "".join("".join(f"{w}\t{g}\t{p}\n" for w, g, p in zip(s.tokens, s.tags, tags)) + "\n"
                        for s, tags in zip(sentences, predicted))
        atomic_write_text(predictions_file, lines)
    return evaluate_tags([s.tags for s in sentences], predicted), predicted
