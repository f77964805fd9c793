"""S7 and its scores for a span tagger (GLiNER, :mod:`aclm.steps.spans`): fine-tuned on the gold sample
(``gliner_finetuned``) or as pretrained (``gliner_zero_shot``, which has no S7), scored on the run's test sets
by the scorer every method's result goes through (:func:`aclm.stages.scores.record`)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from aclm.base.data import check_label_sets
from aclm.base.io import atomic_write_text
from aclm.base.runtime import RunError, seed_everything, select_device
from aclm.stages import layout, outputs
from aclm.stages.declare import stage
from aclm.stages.scores import EVAL_KEYS, record, test_datasets_read_as, test_files

MODEL_DIR = "gliner"


def gold_types(data: Path) -> tuple[list, list, list[str]]:
    train, dev = outputs.gold(data, "train"), outputs.gold(data, "dev")
    return train, dev, check_label_sets({"train": train, "dev": dev})


@stage(layout.S7, keys=("gliner", "seed", "ner.on_no_learning"))
def span_stage(c, out: Path, data: Path) -> dict:
    """GLiNER fine-tuned on the gold sample, the epoch with the best dev F1 kept."""
    from aclm.steps.spans import finetune, load_gliner, type_names

    seed_everything(c.seed)
    select_device(c.device)
    train, dev, types = gold_types(data)
    model = load_gliner(c.gliner.model)
    training = finetune(model, train, dev, type_names(types, c.gliner.labels), c.gliner, c.seed, out)
    best = max(training["dev_f1_by_epoch"])
    if best == 0 and c.ner.on_no_learning == "fail":
        raise RunError(f"{out}: the span tagger learned nothing: dev F1 0 after each of {training['epochs_trained']} "
                       f"epochs (gliner.model {c.gliner.model}, lr {c.gliner.lr}); check gliner.*")
    model.save_pretrained(out / MODEL_DIR)
    return {"train": len(train), "dev": len(dev), "dev_f1": best, "types": types, "training": training}


@stage(layout.S7_EVAL, keys=(*EVAL_KEYS, "gliner"), files=test_files, reads=test_datasets_read_as,
       loads=(layout.S7,))
def span_eval_stage(c, out: Path, chain: Mapping[str, Path]) -> dict:
    """The span tagger's scores: S7's fine-tuned GLiNER, or the pretrained one zero-shot (its dev F1 taken here)."""
    from aclm.base.metrics import evaluate_tags
    from aclm.steps.spans import load_gliner, predict_tags, type_names

    seed_everything(c.seed)                     # encoder:<encoder> builds its span layers here, from the seed
    device = select_device(c.device)
    if layout.S7 in chain:
        model, trained = load_gliner(str(chain[layout.S7] / MODEL_DIR)), outputs.tagger_facts(chain[layout.S7])
    else:
        _, dev, types = gold_types(chain[layout.DATA])
        model, trained = load_gliner(c.gliner.model), {"train": 0, "dev": len(dev), "types": types,
                                                       "training": {"zero_shot": True}}
    model.to(device)
    names = type_names(trained["types"], c.gliner.labels)
    if "dev_f1" not in trained:                 # zero-shot: the dev sentences read above
        trained["dev_f1"] = evaluate_tags([s.tags for s in dev], predict_tags(model, dev, names, c.gliner))["f1"]

    def score(sentences: list, kept: Path) -> tuple[dict, list[list[str]]]:
        predicted = predict_tags(model, sentences, names, c.gliner)
        atomic_write_text(kept, "".join("".join(f"{w}\t{g}\t{p}\n" for w, g, p in zip(s.tokens, s.tags, tags)) + "\n"
                                        for s, tags in zip(sentences, predicted)))
        return evaluate_tags([s.tags for s in sentences], predicted), predicted

    return record(c, out, chain, trained, score)
