"""The command line every stage script shares: ``[--config FILE ...] [--force] [--wait] [key=value ...]``.

``key=value`` overrides the YAML config; one that changes what a stage computes gets folders of its own
(:mod:`aclm.run.naming`).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Callable, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base.config import ConfigError, key_help, load_config, schema_keys
from aclm.base.dicts import flatten, to_dict
from aclm.base.data import DataError
from aclm.base.logs import setup_logging
from aclm.base.runtime import RunError
from aclm.base.signals import Interrupted, check_interrupted, handle_signals
from aclm.engine import ENVIRONMENT
from aclm.stages import layout, outputs
from aclm.run.chain import chain, run_method
from aclm.stages.data import asked_size
from aclm.stages.layout import SHARED, RunLayout
from aclm.run.naming import run_config


#: ``stage_parser(..., stages=WHOLE_CHAIN)``: ``--help`` lists the keys of every stage of the method's chain.
WHOLE_CHAIN = ("*",)


def stage_parser(description: str, stages: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser every script shares; ``--help`` also lists the config keys ``stages`` read."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     add_help=False)
    parser.set_defaults(help_stages=tuple(stages))
    parser.add_argument("-h", "--help", action="store_true",
                        help="show this help, with the config keys the stage reads and their values under the "
                             "profile given (profile=NAME), and exit")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="config overrides, e.g. profile=tiny dataset=multiconer/en gold=100 seed=1")
    parser.add_argument("--config", action="append", default=[], metavar="FILE",
                        help="extra YAML file(s) merged after the profile and method")
    parser.add_argument("--force", action="store_true", help="re-run even if the outputs are current")
    parser.add_argument("--wait", action="store_true",
                        help="if another run writes the same folder, wait for it instead of failing at once")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--as-named", action="store_true",
                        help="folders as variant= names them, not after the overrides (a grid's cells)")
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> tuple[argparse.Namespace, DictConfig]:
    args = parser.parse_args(argv)
    if args.help:
        print(parser.format_help() + stage_keys_help(args.overrides, args.help_stages))
        sys.exit(0)
    setup_logging()
    try:
        cfg = (load_config if args.as_named else run_config)(args.overrides, args.config)
    except (ConfigError, KeyError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    if args.print_config:
        print(OmegaConf.to_yaml(cfg, resolve=True))
        sys.exit(0)
    return args, cfg


def stage_keys_help(overrides: Sequence[str], stages: Sequence[str]) -> str:
    """The config keys ``stages`` read, each with its value under the given profile and what it means."""
    if not stages:
        return ""
    words = list(overrides)
    if stages != WHOLE_CHAIN and not any(w.startswith("method=") for w in words) and not set(stages) & set(SHARED):
        words.append("method=aclm")                     # the method whose chain has S2-S5
    try:
        cfg = load_config(words)
    except (ConfigError, KeyError) as err:
        return f"\n(no key list: {err})\n"
    steps = chain(cfg)
    chosen = steps if stages == WHOLE_CHAIN else [s for s in steps if s.name in stages]
    if not chosen:
        return f"\nmethod {cfg.method} has no stage {', '.join(stages)}: pick a method= that has one\n"
    lines = [f"\nconfig keys read (method={cfg.method}, profile={cfg.profile}; override any as key=value):"]
    shown: set[str] = set()
    for step in chosen:
        keys = [k for k in leaf_keys(cfg, step.stage.keys_of(cfg)) if k not in shown]
        if keys:
            lines += [f"  {step.name}:", *(line for name in keys for line in key_lines(cfg, name))]
        shown.update(keys)
    lines.append("  every stage (where things are and what watches them; in no stage's fingerprint):")
    lines += [line for name in ENVIRONMENT for line in key_lines(cfg, name)]
    return "\n".join(lines) + "\n"


def key_lines(cfg: DictConfig, name: str) -> list[str]:
    """``name = value``, then what the key means (wrapped)."""
    lines = [f"    {name} = {to_dict(OmegaConf.select(cfg, name))}"]
    if name in schema_keys():
        lines += textwrap.wrap(key_help(name), 100, initial_indent=" " * 8, subsequent_indent=" " * 8)
    return lines


def leaf_keys(cfg: DictConfig, reads: Sequence[str]) -> list[str]:
    """The keys under ``reads`` (a key, or a section: every key in it), in the config's order."""
    keys = []
    for read in reads:
        node = to_dict(OmegaConf.select(cfg, read))
        keys += [f"{read}.{key}" for key in flatten(node)] if isinstance(node, dict) and node else [read]
    return keys


def main_guard(main: Callable[[], None]) -> None:
    """Run a script's ``main``; an expected user error is one line and exit 1.  SIGINT / SIGTERM exit 130 / 143,
    leaving no scratch folder or stamp for the running stage, even where a library swallowed the signal."""
    handle_signals()
    try:
        main()
        check_interrupted()
    except (Interrupted, Exception) as err:
        stop = err if isinstance(err, Interrupted) else None
        try:
            check_interrupted()             # an error caused by a signal (a torn save) is the signal's
        except Interrupted as signalled:
            stop = stop or signalled
        if stop:
            print(f"interrupted ({stop}): the running stage was not stamped; a rerun resumes after the last "
                  f"finished stage", file=sys.stderr)
            sys.exit(stop.exit_code)
        if not isinstance(err, (DataError, FileNotFoundError, ConfigError, RunError)):
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


def summary(cfg: DictConfig, done: Mapping[str, Path]) -> str:
    """A finished run's last lines: its warnings, its F1 beside the setting's Gold-only, and its result.json."""
    out = list(done.values())[-1]
    result = outputs.result(out)
    drawn = outputs.gold_size(done[layout.DATA])
    gold = cfg.gold if asked_size(cfg) in (None, drawn) else f"{cfg.gold}, {drawn} sentences drawn"
    plain = RunLayout.of(cfg).of_method(layout.GOLD_ONLY).result_path
    beside = (f" (Gold-only {outputs.result(plain.parent)['f1']:.2f})"
              if cfg.method != layout.GOLD_ONLY and plain.exists() else "")
    lines = [f"WARNING: {warning}" for warning in result.get("warnings", [])]
    lines.append(f"{cfg.method} on {cfg.dataset} (gold {gold}, seed {cfg.seed}): F1 {result['f1']:.2f}{beside}"
                 f"{' (flagged: see the warning above)' if result.get('warnings') else ''}  [{out / layout.RESULT}]")
    return "\n".join(lines)


def stage_script(doc: str, stage_name: str, label: str) -> None:
    """A stage script's main: run the method's chain up to ``stage_name`` (None: all of it); ``--force`` re-runs
    that stage (else the tagger's training) and everything after it."""
    def main() -> None:
        args, cfg = parse(stage_parser(doc, [stage_name] if stage_name else WHOLE_CHAIN))
        steps = [step.name for step in chain(cfg)]
        if stage_name and stage_name not in steps:
            raise ConfigError(f"method {cfg.method!r} has no stage {stage_name} "
                              f"(its chain: {', '.join(steps)}); pick another method=")
        trained = steps[-2]                 # the tagger the last stage scores (S1 or S7)
        done = run_method(cfg, until=stage_name, force=(stage_name or trained) if args.force else None,
                          wait=args.wait)
        if stage_name is None:
            print(summary(cfg, done))
            return
        found = json.dumps(outputs.facts(done[stage_name]), separators=(", ", ": "))
        print(f"{label}: {done[stage_name]}  {found if len(found) <= 300 else found[:297] + '...'}")

    main_guard(main)
