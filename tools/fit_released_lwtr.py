#!/usr/bin/env python
"""Fit the replacement rate of the LwTR files shipped with the authors' code, size by size.

    git clone https://github.com/Sreyan88/ACLM /tmp/ACLM-src   # the files are in commit 017907e (gone by 4a9fcda)
    mkdir /tmp/aclm && git -C /tmp/ACLM-src archive 017907e data | tar -x -C /tmp/aclm
    python tools/fit_released_lwtr.py /tmp/aclm
    python tools/fit_released_lwtr.py /tmp/aclm --replay       # also regenerate them (about a minute)

The `released` LwTR rule (baselines/lwtr.py) was inferred from the en/de/hi 100-gold files: a token off
NLTK's stop words changes with probability p * (1 - q), q its share of its tag's pool. The 1000-gold
files showed more changes than it predicts (z = 1.1, 1.9, 2.1), so this tests it on every released file:
one p for all sizes, or a rate that grows with size? Prints per file, per size and overall: eligible and
changed tokens, changes expected at --p, the maximum-likelihood p ± SE and the z-score; then chi-square
tests of one p and the slope of p on log10(size). Files that break the layout (gold, then R augmentations
per gold sentence with its tags) are listed and left out. --replay regenerates each file as Dai & Adel's
code does (numpy seed 26) and counts what it reproduces word for word. Reads only; writes nothing.
Results: docs/reference-code.md.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from scipy.optimize import brentq
from scipy.stats import chi2

from aclm.base.data import TaggedSentence, read_conll
from aclm.run.cli import main_guard
from baselines.lwtr import RELEASED_SEED, is_fixed, token_distribution
from baselines.lwtr import replay as replay_lwtr

VARIANT = "released"
LWTR_NAME = re.compile(r"(?P<lang>.+)_sample_train_lwtr\.conll")


@dataclass
class Positions:
    """Every eligible gold token once: ``d`` (the chance a draw returns another word) and ``k`` (how many
    of its ``rounds`` augmentations changed it)."""

    d: np.ndarray
    k: np.ndarray
    rounds: int


@dataclass
class Fit:
    eligible: int           # eligible tokens across the augmentations
    changed: int
    expected: float         # changes expected at the reference p
    z: float                # (changed - expected) / sd at the reference p
    p: float                # maximum-likelihood p
    se: float


@dataclass
class Replay:
    identical: int          # augmentations the replay writes word for word
    total: int
    coins: int              # eligible tokens whose coin came up (replaced, perhaps by the same word)
    same_word: int          # ... and whose draw returned the word already there


def pooled(parts: Sequence[Positions]) -> Positions:
    """Several files' positions as one (every file read with the same --rounds)."""
    return Positions(np.concatenate([p.d for p in parts]), np.concatenate([p.k for p in parts]), parts[0].rounds)


def split_layout(gold: Sequence[TaggedSentence], released: Sequence[TaggedSentence],
                 rounds: int) -> tuple[list[list[TaggedSentence]], list[str]]:
    """The augmentations of each gold sentence, and what breaks the layout (gold first, then ``rounds``
    augmentations per gold sentence in gold order, tags unchanged). Any problem: no augmentations."""
    n = len(gold)
    if len(released) != (1 + rounds) * n:
        return [], [f"{len(released)} sentences, not (1 + {rounds}) x {n} gold"]
    problems = [f"sentence {i + 1} is not gold sentence {i + 1}" for i in range(n)
                if (released[i].tokens, released[i].tags) != (gold[i].tokens, gold[i].tags)]
    groups = [list(released[n + i * rounds: n + (i + 1) * rounds]) for i in range(n)]
    problems += [f"augmentation {n + i * rounds + r + 1} does not carry gold sentence {i + 1}'s tags"
                 for i, group in enumerate(groups) for r, new in enumerate(group) if new.tags != gold[i].tags]
    return ([] if problems else groups), problems


def positions(gold: Sequence[TaggedSentence], groups: Sequence[Sequence[TaggedSentence]],
              rounds: int) -> tuple[Positions, list[str]]:
    """The eligible positions of ``gold`` with their ``d`` and change counts, and what breaks the rule
    (a function word changed, a drawn word that is not in its tag's pool)."""
    dist = token_distribution(gold, VARIANT)
    share = {tag: dict(zip(tokens, probs)) for tag, (tokens, probs) in dist.items()}
    d, k, problems = [], [], []
    for source, group in zip(gold, groups):
        for j, (token, tag) in enumerate(zip(source.tokens, source.tags)):
            new = [s.tokens[j] for s in group]
            changed = sum(w != token for w in new)
            if is_fixed(token, VARIANT):
                if changed:
                    problems.append(f"function word {token!r} changed {changed} times")
                continue
            problems += [f"{w!r} drawn for {tag} is not in that pool" for w in new if w not in share[tag]]
            d.append(1.0 - share[tag][token])
            k.append(changed)
    return Positions(np.array(d, dtype=float), np.array(k, dtype=int), rounds), problems


def fit(pos: Positions, p0: float = 0.3) -> Fit:
    """Maximum likelihood of ``p`` for changes ~ Binomial(rounds, p * d), position by position: the
    log-likelihood is concave in p, so its slope has one root (p = 1 if still rising there); SE from the
    Fisher information sum(R d / (p (1 - p d)))."""
    d, k, rounds = pos.d, pos.k, pos.rounds
    eligible, changed = rounds * len(d), int(k.sum())
    mean0 = p0 * d
    expected = float(rounds * mean0.sum())
    sd0 = math.sqrt(float(rounds * (mean0 * (1 - mean0)).sum()))
    z = (changed - expected) / sd0 if sd0 else float("nan")
    if changed == 0:
        return Fit(eligible, changed, expected, z, 0.0, float("nan"))

    def slope(p: float) -> float:
        return changed / p - float(((rounds - k) * d / (1 - p * d)).sum())

    p = 1.0 if slope(1 - 1e-12) > 0 else brentq(slope, 1e-12, 1 - 1e-12, xtol=1e-13)
    information = float((rounds * d / (p * (1 - p * d))).sum()) if p < 1 else float("inf")
    return Fit(eligible, changed, expected, z, p, 1 / math.sqrt(information) if information else float("nan"))


def replay(gold: Sequence[TaggedSentence], groups: Sequence[Sequence[TaggedSentence]], rounds: int,
           p: float = 0.3, seed: int = RELEASED_SEED) -> Replay:
    """Regenerate the augmentations as Dai & Adel's LwTR code drew them (:func:`baselines.lwtr.replay`) and
    compare with ``groups``; the pools are baselines.lwtr's own, so a match checks them too."""
    made = replay_lwtr(gold, p, rounds, seed)
    released = [new for group in groups for new in group]
    return Replay(identical=sum(new.tokens == old.tokens for new, old in zip(made, released)),
                  total=len(released),
                  coins=sum(len(new.meta["redrawn"]) for new in made),
                  same_word=sum(new.tokens[j] == gold[new.meta["source_index"]].tokens[j]
                                for new in made for j in new.meta["redrawn"]))


def pairs(root: Path) -> tuple[list[tuple[str, str, Path, Path]], list[str]]:
    """(size, language, gold file, LwTR file) for every LwTR file under ``root``/data, and the files
    with no gold sample beside them."""
    found, unpaired = [], []
    for lwtr in sorted((root / "data").glob("*/lwtr/*_sample_train_lwtr.conll")):
        size, lang = lwtr.parent.parent.name, LWTR_NAME.fullmatch(lwtr.name)["lang"]
        gold = lwtr.parent.parent / f"{lang}_sample_train.conll"
        if gold.is_file():
            found.append((size, lang, gold, lwtr))
        else:
            unpaired.append(f"{lwtr.relative_to(root)}: no {gold.relative_to(root)}")
    return found, unpaired


def size_key(size: str) -> tuple[int, str]:
    return (int(size), size) if size.isdigit() else (10 ** 9, size)


def spread(fits: Sequence[Fit], pooled: Fit) -> tuple[float, int, float, float]:
    """Chi-square of the fitted p's around the pooled one (df = fits - 1), and the chances of one at least
    as large (the p's differ more than their standard errors allow) and at most as large (less)."""
    usable = [f for f in fits if not math.isnan(f.se) and f.se > 0]
    stat, df = sum(((f.p - pooled.p) / f.se) ** 2 for f in usable), len(usable) - 1
    return stat, df, float(chi2.sf(stat, df)), float(chi2.cdf(stat, df))


def trend(fits: dict[str, Fit]) -> tuple[float, float]:
    """Weighted least-squares slope of the fitted p on log10(size), with its standard error."""
    numeric = [(math.log10(int(size)), f) for size, f in fits.items() if size.isdigit()]
    (slope, _), cov = np.polyfit([x for x, _ in numeric], [f.p for _, f in numeric], 1,
                                 w=[1 / f.se for _, f in numeric], cov="unscaled")
    return float(slope), math.sqrt(cov[0, 0])


def table(rows: list[tuple[str, int | str, Fit]], first: str, p0: float) -> str:
    out = [f"| {first} | files | eligible tokens | changed | expected at p={p0} | fitted p ± SE | z |",
           "|---|---:|---:|---:|---:|---|---:|"]
    for name, files, f in rows:
        out.append(f"| {name} | {files} | {f.eligible:,} | {f.changed:,} | {f.expected:,.1f} | "
                   f"{f.p:.4f} ± {f.se:.4f} | {f.z:+.2f} |")
    return "\n".join(out)


def replay_row(size: str, lang: str, f: Fit, r: Replay) -> str:
    return (f"| {size} | {lang} | {r.identical:,} of {r.total:,} | {r.coins / f.eligible:.4f} | {f.p:.4f} | "
            f"{r.same_word:,} |")


def summed(replays: list[Replay]) -> Replay:
    return Replay(*map(sum, zip(*map(astuple, replays))))


def read_files(root: Path, rounds: int, p: float, with_replay: bool):
    """Per size, each file's (language, positions); per file, (size, language, fit, replay) when
    ``with_replay``; and the files left out, with why."""
    found, skipped = pairs(root)
    by_size: dict[str, list[tuple[str, Positions]]] = {}
    replays: list[tuple[str, str, Fit, Replay]] = []
    for size, lang, gold_path, lwtr_path in found:
        gold, released = read_conll(gold_path), read_conll(lwtr_path)
        groups, problems = split_layout(gold, released, rounds)
        if not problems:
            pos, problems = positions(gold, groups, rounds)
        if problems:
            skipped.append(f"{lwtr_path.relative_to(root)}: {len(problems)} problems, first: {problems[0]}")
            continue
        by_size.setdefault(size, []).append((lang, pos))
        if with_replay:
            replays.append((size, lang, fit(pos, p), replay(gold, groups, rounds, p)))
    return dict(sorted(by_size.items(), key=lambda item: size_key(item[0]))), replays, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("root", type=Path, help="folder holding the released repository's data/ tree")
    parser.add_argument("--rounds", type=int, default=5, help="augmentations per gold sentence (default 5)")
    parser.add_argument("--p", type=float, default=0.3, help="the rate to test against (default 0.3)")
    parser.add_argument("--replay", action="store_true",
                        help="also regenerate every file as Dai & Adel's code does (baselines.lwtr.replay, numpy "
                             "seed 26) and count the augmentations it writes word for word (about a minute)")
    args = parser.parse_args()
    if not (args.root / "data").is_dir():
        raise FileNotFoundError(f"{args.root / 'data'} is not a folder")
    by_size, replays, skipped = read_files(args.root, args.rounds, args.p, args.replay)

    size_fits = {}
    for size, files in by_size.items():
        print(f"## {size} gold sentences\n")
        size_fits[size] = fit(pooled([pos for _, pos in files]), args.p)
        rows = [*[(lang, 1, fit(pos, args.p)) for lang, pos in files], ("all", len(files), size_fits[size])]
        print(table(rows, "language", args.p) + "\n")
    overall = fit(pooled([pos for files in by_size.values() for _, pos in files]), args.p)
    print("## By size\n")
    rows = [(size, len(by_size[size]), f) for size, f in size_fits.items()]
    print(table([*rows, ("all", sum(len(files) for files in by_size.values()), overall)], "gold size", args.p) + "\n")
    file_fits = [fit(pos, args.p) for files in by_size.values() for _, pos in files]
    for what, fits in (("sizes", list(size_fits.values())), ("files", file_fits)):
        stat, df, above, below = spread(fits, overall)
        print(f"One p for all {df + 1} {what}: chi2 = {stat:.2f}, df = {df}, "
              f"P(chi2 >= that) = {above:.3g}, P(chi2 <= that) = {below:.3g}")
    if sum(size.isdigit() for size in size_fits) >= 2:
        slope, se = trend(size_fits)
        print(f"Slope of p per tenfold size (weighted least squares): {slope:+.4f} ± {se:.4f} (z = {slope / se:+.2f})")
    if replays:
        print("\n## Replay (Dai & Adel's code, numpy seed 26)\n")
        print("| size | language | augmentations identical | coins up / eligible | fitted p | draws of the same word |")
        print("|---|---|---:|---:|---:|---:|")
        for size in by_size:
            mine = [(lang, f, r) for s, lang, f, r in replays if s == size]
            print("\n".join(replay_row(size, lang, f, r) for lang, f, r in mine))
            print(replay_row(size, "all", size_fits[size], summed([r for *_, r in mine])))
        print(replay_row("all", "all", overall, summed([r for *_, r in replays])))
    if skipped:
        print("\nLeft out:\n" + "\n".join(f"- {line}" for line in skipped))


if __name__ == "__main__":
    main_guard(main)
