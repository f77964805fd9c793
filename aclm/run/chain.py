"""Every method's chain of stages, declared as data, and the one loop that runs it.

    S0 data -> S1 gold tagger -> S1 scores              (Gold-only ends here)
            -> the method's own stages -> S6 -> S7 tagger -> S7 scores
    S0 data -> S7 tagger on the gold alone -> S7 scores (Gold-only tuned on dev; GLiNER fine-tuned)
    S0 data -> S7 scores                                (GLiNER zero-shot)

The method's own stages are ACLM's S2-S5 or one ``augment`` stage running the method table's function.  Unless
``storage.keep_models``, weights are pruned once read (S4 after S5; S7 once scored where
``storage.keep_final_tagger`` is off, as in the grids) and rebuilt by the loop when a stage needs them again
(:class:`aclm.engine.Pruned`).  Planning a chain loads no training library.
"""

from __future__ import annotations

import inspect
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from omegaconf import DictConfig

from aclm.base import registry
from aclm.base.config import ConfigError
from aclm.base.logs import logging_to
from aclm.base.signals import check_interrupted
from aclm.engine import Pruned, Stale, folder_lock, planning, prune
from aclm.engine.stages import Stage, in_planning
from aclm.run.datacheck import preflight
from aclm.run.estimates import guesses, recorded_seconds, rest
from aclm.stages import layout
from aclm.stages.augment import augment_stage
from aclm.stages.generation import generation_stage
from aclm.stages.generator import generator_stage
from aclm.stages.data import data_stage
from aclm.stages.keywords import keywords_stage
from aclm.stages.layout import RunLayout
from aclm.stages.ner import s1_stage, s7_stage
from aclm.stages.postprocess import postprocess_stage
from aclm.stages.scores import s1_eval_stage, s7_eval_stage
from aclm.stages.spans import span_eval_stage, span_stage
from aclm.stages.templates import templates_stage
from aclm.stages.tuned import s7_tuned_stage


log = logging.getLogger("aclm.run.chain")


class WiringError(ValueError):
    """A chain whose step takes a folder the stage does not, or one of a step that is not before it."""


@dataclass(frozen=True)
class Step:
    """One stage of a chain, wired by its builder's signature: after ``(config, out)`` each parameter gets the
    folder of the earlier step of its name, ``chain`` every earlier step, ``needs`` the S6 folders of :attr:`needs`;
    ``renamed`` feeds one from another step (None: its default).  Bad wiring fails when the chain is built."""

    name: str                                   # its directory (aclm.stages.layout)
    stage: Stage                                # called as stage(cfg, force=..., **{argument: directory})
    renamed: Mapping[str, str | None] = field(default_factory=dict)
    needs: tuple[str, ...] = ()                 # the S6 of these methods of the setting, where they ran (needs=)
    frees: str = ""                             # an earlier step whose model weights go once this one is done

    def __post_init__(self) -> None:
        unknown = set(self.renamed) - set(self._parameters())
        wanted = {name for name, p in self._parameters().items() if p.default is inspect.Parameter.empty}
        missing = wanted - {*self.inputs, *(["needs"] if self.needs else []), *(["chain"] if self.scores else [])}
        if unknown or missing:
            raise WiringError(f"step {self.name}: {self.stage.build.__name__} takes {sorted(self._parameters())}; "
                              + (f"it renames {sorted(unknown)}" if unknown else f"nothing gives {sorted(missing)}"))

    def _parameters(self) -> dict[str, inspect.Parameter]:
        """The builder's parameters after ``(config, out)``."""
        parameters = list(inspect.signature(self.stage.build).parameters.values())[2:]
        return {p.name: p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    @property
    def inputs(self) -> dict[str, str]:
        """Each folder argument -> the earlier step whose folder it gets, in the builder's order."""
        sources = {name: self.renamed.get(name, name) for name in self._parameters() if name not in ("chain", "needs")}
        return {name: source for name, source in sources.items() if source is not None}

    @property
    def scores(self) -> bool:
        """A scoring stage: it gets every earlier step by name (``chain=``)."""
        return "chain" in self._parameters()

    def describe(self, cfg: DictConfig) -> str:
        """Two lines for ``--list-stages``: what it is and reads, and the config keys it reads."""
        reads = [*(s if a == s else f"{a}={s}" for a, s in self.inputs.items()),
                 *(f"{m}/{layout.S6} (if it ran)" for m in self.needs)]
        if self.scores:
            reads.append("chain= every earlier stage by name")
        line = f"{self.name:<15} {self.stage.build.__module__ + '.' + self.stage.build.__name__:<37}"
        line += f" reads {', '.join(reads)}" if reads else ""
        line = (line + (f"; then prunes {self.frees}" if self.frees else "")).rstrip()
        return f"{line}\n{'':<16}keys: {', '.join(self.stage.keys_of(cfg))}"


def chain(cfg: DictConfig) -> list[Step]:
    """The steps of ``cfg.method``, in order, as this config runs them."""
    method = registry.get(cfg.method)
    gold = [Step(layout.DATA, data_stage), Step(layout.S1, s1_stage)]
    tagger = Step(layout.S7, s7_tuned_stage) if cfg.tuning.learning_rates else Step(layout.S7, s7_stage)
    if method.tagger != "flair":             # a span tagger: trained on the gold sample, or as pretrained
        trained = [Step(layout.S7, span_stage)] if method.tagger == "gliner" else []
        return wired([gold[0], *trained, Step(layout.S7_EVAL, span_eval_stage)])
    if method.generation == "none" and method.name == layout.GOLD_ONLY:
        return wired([*gold, Step(layout.S1_EVAL, s1_eval_stage)])
    if method.generation == "none":
        return wired([gold[0], Step(layout.S7, s7_tuned_stage, {"s6_postprocess": None}),
                      Step(layout.S7_EVAL, s7_eval_stage)])
    if method.generation == "aclm":
        own = [Step(layout.S2, keywords_stage), Step(layout.S3, templates_stage), Step(layout.S4, generator_stage),
               Step(layout.S5, generation_stage, frees="" if cfg.storage.keep_models else layout.S4)]
    else:
        own = [Step(layout.AUGMENT, augment_stage, needs=method.needs)]
    unfiltered = {} if cfg.postprocess.consistency_filter else {layout.S1: None}
    keep_tagger = cfg.storage.keep_models or cfg.storage.keep_final_tagger
    return wired([*gold, *own,
                  Step(layout.S6, postprocess_stage, {"generations": own[-1].name, **unfiltered}),
                  tagger,
                  Step(layout.S7_EVAL, s7_eval_stage, frees="" if keep_tagger else layout.S7)])


def wired(steps: list[Step]) -> list[Step]:
    """``steps``, checked: each takes only folders of steps before it."""
    for at, step in enumerate(steps):
        earlier = {s.name for s in steps[:at]}
        late = [source for source in step.inputs.values() if source not in earlier]
        if late:
            raise WiringError(f"step {step.name} takes {', '.join(late)}, which no step before it makes "
                              f"(the chain: {', '.join(s.name for s in steps)})")
    return steps


def run_method(cfg: DictConfig, until: str | None = None, force: str | None = None,
               wait: bool = False) -> dict[str, Path]:
    """Run the stages of ``cfg.method`` up to ``until``, re-running every one from ``force`` on; their folders by
    name.  Stopping at a stage keeps the weights it read (``scripts/generation.py`` leaves S4 for another run)."""
    steps = chain(cfg)
    names = [step.name for step in steps]
    if force is not None and force not in names:
        raise ConfigError(f"cannot force {force!r}: method {cfg.method!r} has no such stage "
                          f"(its chain: {', '.join(names)})")
    forced = set(names[names.index(force):]) if force else set()
    if until == names[-1]:
        until = None                        # the whole chain
    if in_planning():                       # checking a finished run (a grid, a table): no data check, no lock
        return _run_steps(cfg, steps, until, forced, {})
    will_run = steps[:names.index(until) + 1] if until else steps
    preflight(cfg, [key for step in will_run for key in step.stage.keys_of(cfg)])
    here = RunLayout.of(cfg)
    with folder_lock(here.root, here.method_dir.name, here.method_dir, wait=wait), logging_to(here.log_path):
        log.info("run of %s (%s)", cfg.method, " ".join(sys.argv))
        return _run_steps(cfg, steps, until, forced, {},
                          {step.name: recorded_seconds(cfg, step.name) for step in steps})


def plan(cfg: DictConfig, force: str | None = None) -> list[tuple[str, str]]:
    """What a run would do, building nothing: each stage with ``current``, why it must run, or ``after <stage>``."""
    steps = chain(cfg)
    names = [step.name for step in steps]
    done: dict[str, Path] = {}
    with planning():
        try:
            _run_steps(cfg, steps, None, set(names[names.index(force):]) if force else set(), done)
            return [(name, "current") for name in names]
        except Stale as stale:
            first, reason = stale.stage_name, stale.reason
    after = names[names.index(first) + 1:]
    return [*((name, "current") for name in done), (first, reason), *((n, f"after {first}") for n in after)]


def _run_steps(cfg: DictConfig, steps: list[Step], until: str | None, forced: set[str], done: dict[str, Path],
               recorded: Mapping[str, float | None] | None = None) -> dict[str, Path]:
    """Run (or, planning, check) ``steps`` into ``done``; with ``recorded``, log how long the rest may take."""
    by_name = {step.name: step for step in steps}

    def run(step: Step, again: bool = False) -> Path:
        upstream: dict = {argument: done[source] for argument, source in step.inputs.items()}
        if step.needs:
            here = RunLayout.of(cfg)
            needed = [here.of_method(m).stage(layout.S6) for m in step.needs]
            upstream["needs"] = [d for d in needed if (d / layout.REPORT).exists()]
        if step.scores:
            upstream["chain"] = dict(done)
        return step.stage(cfg, force=again or step.name in forced, **upstream)

    for at, step in enumerate(steps, 1):
        check_interrupted()
        try:
            done[step.name] = run(step)
        except Pruned as gone:              # it must run and needs a deleted model: rebuild that, then run it
            run(by_name[gone.stage_dir.name], again=True)
            done[step.name] = run(step)
        if step.name == until:
            return done
        if step.frees:
            prune(done[step.frees])
        if recorded is not None and at < len(steps):
            todo = {s.name: recorded[s.name] for s in steps[at:]}
            log.info("%d of %d stages done; %s", at, len(steps), rest(guesses(cfg, todo, done)))
    return done


def run_to_result(cfg: DictConfig) -> Path:
    """Run every stage of the method; the directory of its ``result.json``."""
    return list(run_method(cfg).values())[-1]
