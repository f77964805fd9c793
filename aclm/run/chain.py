"""Every method's chain of stages, top to bottom, in one place.

    S0 data -> S1 gold tagger -> S1 scores              (Gold-only ends here)
            -> the method's own stages -> S6 -> S7 tagger -> S7 scores

The method's own stages are ACLM's S2-S5 (keywords, templates, generator,
generation) or one ``augment`` stage running the method's function from the
method table (:mod:`aclm.base.registry`).  Each stage gets the directories it
reads as arguments; :func:`aclm.run.stages.stage` skips it when nothing it reads
changed.

Unless ``storage.keep_models``, the S4 generator's weights are deleted once
S5 has written its generations, and, when ``storage.keep_final_tagger`` is
off as in the grids, the S7 tagger's once it is scored
(:func:`aclm.run.stages.prune`); a later stage that needs them again rebuilds them.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from aclm.base import registry
from aclm.base.augmentation import Gold
from aclm.base.data import read_conll
from aclm.base.datasets import get_spec
from aclm.base.io import write_jsonl
from aclm.base.runtime import seed_everything, select_device
from aclm.run import experiment as ex
from aclm.run import layout, pipeline
from aclm.run.datacheck import preflight
from aclm.run.layout import RunLayout
from aclm.run.stages import Pruned, in_planning, prune, stage


def augment_stage(cfg: DictConfig, data: Path, *needed: Path, force: bool = False) -> Path:
    """A baseline's one generation stage: its ``augment(cfg, gold)`` from the method table."""
    method = registry.get(cfg.method)

    @stage(layout.AUGMENT, reads=("method", "dataset", "seed", *method.reads), files=method.input_files())
    def augment(c: DictConfig, out: Path, data: Path, *needed: Path) -> dict:
        seed_everything(c.seed)
        gold = Gold(read_conll(data / "train.conll"), read_conll(data / "dev.conll"), ex.entity_types(data),
                    get_spec(c.dataset).language, ex.sentence_languages(data, "train"),
                    ex.sentence_languages(data, "dev"), select_device(c.device), out,
                    {d.parent.name: d for d in needed})
        rows, counts = method.augmenter()(c, gold)
        write_jsonl(out / layout.GENERATIONS, rows)
        return counts

    return augment(cfg, data, *needed, force=force)


def run_method(cfg: DictConfig, until: str | None = None, force: str | None = None) -> dict[str, Path]:
    """The stages of ``cfg.method`` for one setting, in order, up to ``until`` (a stage name) if given;
    the stage named ``force`` re-runs even if current.

    Returns each stage's directory by name; the last one holds ``result.json``.
    """
    method = registry.get(cfg.method)
    if not in_planning():
        preflight(cfg)
    done: dict[str, Path] = {}
    steps = {}

    def step(name: str, run, *upstream: Path) -> bool:
        steps[name] = lambda again=False: run(cfg, *upstream, force=again or name == force)
        try:
            done[name] = steps[name]()
        except Pruned as gone:  # this stage must run and needs a deleted model: rebuild it, then run
            steps[gone.stage_dir.name](True)
            done[name] = steps[name]()
        return name == until

    def drop_weights(name: str) -> None:
        keep = cfg.storage.keep_models or (name == layout.S7 and cfg.storage.keep_final_tagger)
        if not keep:
            prune(done[name])

    if step(layout.DATA, ex.data_stage) or step(layout.S1, ex.s1_stage, done[layout.DATA]):
        return done
    data, s1 = done[layout.DATA], done[layout.S1]
    if method.generation == "none":
        step(layout.S1_EVAL, ex.s1_eval_stage, data, s1)
        return done
    if method.generation == "aclm":
        if (step(layout.S2, pipeline.keywords_stage, data, s1)
                or step(layout.S3, pipeline.templates_stage, done[layout.S2])
                or step(layout.S4, pipeline.generator_stage, data, done[layout.S3])
                or step(layout.S5, pipeline.generate_stage, data, done[layout.S3], done[layout.S4])):
            return done
        drop_weights(layout.S4)
        generations = done[layout.S5]
    else:
        here = RunLayout.of(cfg)
        needed = [here.of_method(n).stage(layout.S6) for n in method.needs]
        if step(layout.AUGMENT, augment_stage, data, *[d for d in needed if (d / layout.REPORT).exists()]):
            return done
        generations = done[layout.AUGMENT]
    consistency = [s1] if cfg.postprocess.consistency_filter else []
    if (step(layout.S6, pipeline.postprocess_stage, data, generations, *consistency)
            or step(layout.S7, ex.s7_stage, data, done[layout.S6])):
        return done
    step(layout.S7_EVAL, ex.s7_eval_stage, *done.values())
    drop_weights(layout.S7)
    return done


def result_dir(cfg: DictConfig) -> Path:
    """Run every stage of the method; the directory of its ``result.json``."""
    return list(run_method(cfg).values())[-1]
