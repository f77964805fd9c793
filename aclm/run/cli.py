"""The command-line shape every stage script shares.

    python scripts/<stage>.py [--config FILE ...] [--force] [--wait] [key=value ...]

``key=value`` pairs override the YAML configuration (``profile=tiny``,
``dataset=conll2003/en``, ``gold=200``, ``ner.epochs=5`` ...); an override that
changes what a stage computes gets folders of its own (:mod:`aclm.run.naming`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from aclm.base.augmentation import NoAugmentation
from aclm.base.config import ConfigError, load_config
from aclm.base.data import DataError
from aclm.base.runtime import Interrupted, check_interrupted, handle_signals, setup_logging
from aclm.run.chain import chain, run_method
from aclm.run.locks import Busy
from aclm.run.naming import run_config
from aclm.run.stages import NoSpace
from aclm.run.tagger import NoLearning


def stage_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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
    setup_logging()
    try:
        cfg = (load_config if args.as_named else run_config)(args.overrides, args.config)
    except (ConfigError, KeyError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    if args.print_config:
        print(OmegaConf.to_yaml(cfg, resolve=True))
        sys.exit(0)
    return args, cfg


def main_guard(main: Callable[[], None]) -> None:
    """Run a script's ``main``; turn expected user errors into one clear line and exit code 1.

    SIGINT and SIGTERM stop it with exit 130 / 143 (:func:`aclm.base.runtime.handle_signals`): no scratch
    folder and no stamp are left for the stage that was running, even when a library swallowed the signal
    or failed because of it.
    """
    handle_signals()
    try:
        main()
        check_interrupted()
    except Interrupted as stop:
        _interrupted(stop)
    except (DataError, FileNotFoundError, ConfigError, NoLearning, NoAugmentation, Busy, NoSpace) as err:
        try:
            check_interrupted()             # an error caused by a signal (a torn save) is the signal's
        except Interrupted as stop:
            _interrupted(stop)
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except Exception:
        try:
            check_interrupted()
        except Interrupted as stop:
            _interrupted(stop)
        raise


def _interrupted(stop: Interrupted) -> None:
    print(f"interrupted ({stop}): the running stage was not stamped; a rerun resumes after the last "
          f"finished stage", file=sys.stderr)
    sys.exit(stop.exit_code)


def stage_script(doc: str, stage_name: str, label: str) -> None:
    """A stage script's main: run the method's chain up to ``stage_name`` (earlier stages when needed).

    With ``stage_name=None`` the whole chain runs; ``--force`` re-runs the named stage (else the tagger's
    training) and so everything after it.
    """
    def main() -> None:
        args, cfg = parse(stage_parser(doc))
        steps = [step.name for step in chain(cfg)]
        if stage_name and stage_name not in steps:
            raise ConfigError(f"method {cfg.method!r} has no stage {stage_name} "
                              f"(its chain: {', '.join(steps)}); pick another method=")
        trained = steps[-2]                 # the tagger the last stage scores (S1 or S7)
        done = run_method(cfg, until=stage_name, force=(stage_name or trained) if args.force else None,
                          wait=args.wait)
        out = done[stage_name] if stage_name else list(done.values())[-1]
        print(f"{label}: {out}")

    main_guard(main)
