"""Paper tables from run results: ours (mean ± std over seeds) beside the paper's numbers.

The grid gives the layout: its index templates place each run's row in the reference CSV, its block columns say
which value of result.json fills which column.  An entry is ``ok`` (some seed has a value), ``failed`` (no value,
and the run or the S1 / ACLM run it needs left ``failed.json``) or ``missing``.  Significance: Welch's t-test over
seeds of the compared method against the baseline with the highest mean per column and row group, and of every
entry against the grid's ``compare.control``.  Tables of any runs (:mod:`aclm.tables.tabulate_runs`) go through the
same :func:`assemble`.  Reading a table: docs/reproducing.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

import pandas as pd
from scipy import stats

from aclm.base.datasets import registry
from aclm.base.io import atomic_write_text, read_json, sha256_path, write_json
from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import Cell, Grid
from aclm.stages import outputs
from aclm.stages.layout import GOLD_ONLY
from aclm.engine.code import code_digests
from aclm.engine.identity import model_reads
from aclm.tables.parameters import parameters_line
from aclm.tables.perplexity import perplexity
from aclm.tables.runs import FAILED, MISSING, OK, Run, compared, differing, method_id, of_cell, shown, tested_sizes

DASH = "—"
#: suffix of the column of a run's dev F1 (``en (dev)``), shown beside its first one; never compared nor tested
DEV = " (dev)"
#: The row of Gold-only trained on twice the gold (:func:`annotate_more`).
ANNOTATE_MORE = "Gold-only at 2N gold"
RUN_COLUMNS = ("column", "method_id", "seed", "run_dataset", "score", "status", "error", "warning", "code",
               "config_hash")
ENTRY_COLUMNS = ("n", "expected", "mean", "std", "seeds", "values", "paper", "diff", "warned", "commits",
                 "config_hashes", "p_control")
#: how a result in a table names the code that made it: a commit, and the digest of uncommitted changes
UNCOMMITTED = "+"
PerplexityFn = Callable[[Run], Optional[float]]


def is_dev(column: str) -> bool:
    return column.endswith(DEV)


# --- collecting runs -----------------------------------------------------------------------

def lookup(result: dict, path: str) -> Optional[float]:
    """The number at a dotted path (``test.multiconer/hi.f1``), or None."""
    node = result
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def warning_of(result: dict) -> Optional[str]:
    """A finished run's warnings, and a tagger that learned nothing (older results say so only by ``dev_f1`` 0)."""
    found = [str(w) for w in result.get("warnings") or []]
    if result.get("dev_f1") == 0 and not any("learned nothing" in w for w in found):
        found.append("its tagger learned nothing (dev F1 0)")
    return "; ".join(found) or None


def code_of(result: dict) -> str:
    """A result's code: its commit (7 digits), then ``+`` and 7 digits of the uncommitted diff's digest if dirty."""
    checkout = result.get("checkout") or {}
    commit = str(checkout.get("commit") or "")[:7] or "not recorded"
    return commit + (f"{UNCOMMITTED}{str(checkout.get('diff_sha256') or '?')[:7]}" if checkout.get("dirty") else "")


def joined(values) -> Optional[str]:
    """The distinct non-empty values, sorted, comma-separated; None when there are none."""
    found = sorted({str(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))})
    return ", ".join(found) or None


def template_fields(grid: Grid, run: Run | Cell) -> dict:
    name = grid.method_names.get(method_id(run), grid.method_names.get(run.method, run.method))
    return {"gold": run.gold, "method": run.method, "method_name": name, "profile": run.profile,
            "dataset": run.dataset, "lang": run.dataset.rsplit("/", 1)[-1], "sweep": run.sweep or ""}


def collect(grid: Grid, runs: Sequence[Run], perplexity_fn: Optional[PerplexityFn] = None) -> pd.DataFrame:
    """One row per (run, column): the index columns, then RUN_COLUMNS."""
    clash = set(grid.index) & {*RUN_COLUMNS, *ENTRY_COLUMNS}
    if clash:
        raise ValueError(f"{grid.name}: index columns {sorted(clash)} clash with the report's own columns")
    rows = []
    for run in runs:
        result, fields = run.result, template_fields(grid, run)
        row = {**{k: t.format(**fields) for k, t in grid.index.items()}, "method_id": method_id(run), "seed": run.seed,
               "run_dataset": run.dataset}
        if result is not None:
            row.update(warning=warning_of(result), code=code_of(result), config_hash=result.get("config_hash"))
        columns = grid.blocks[run.block].columns
        for column, path in columns.items():
            value = None if result is None else (perplexity_fn(run) if path == "perplexity" and perplexity_fn
                                                 else lookup(result, path))
            gap = result is not None and value is None
            rows.append({**row, "column": column.format(**fields), "score": value,
                         "status": MISSING if gap else run.status,
                         "error": f"{run.result_path} has no {path}" if gap else run.error})
        if grid.shows_dev:
            dev = lookup(result or {}, "dev_f1")
            rows.append({**row, "column": next(iter(columns)).format(**fields) + DEV, "score": dev,
                         "status": OK if dev is not None else MISSING, "error": None})
    long = pd.DataFrame(rows, columns=[*grid.index, *RUN_COLUMNS])
    return add_derived(average_datasets(long, grid) if grid.average_datasets else long, grid)


def combined(parts: pd.DataFrame) -> dict:
    """The mean of ``parts``' scores when all are ok; else failed (any failed) or missing, with the first error."""
    states = set(parts["status"])
    status = OK if states == {OK} else FAILED if FAILED in states else MISSING
    errors = parts["error"].dropna()
    return {"score": parts["score"].mean() if status == OK else None, "status": status,
            "error": None if status == OK else (errors.iloc[0] if len(errors) else None),
            **{key: joined(parts[key]) for key in ("warning", "code", "config_hash")}}


def average_datasets(long: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Per seed, each entry's mean over the grid's datasets (the paper's average over languages); a seed counts only
    with every dataset's value, as the paper's averages do.  A failure or gap names its dataset."""
    keys = [*grid.index, "column", "method_id", "seed"]
    rows = []
    for key, group in long.groupby(keys, sort=False):
        blamed = group.assign(error=[None if pd.isna(e) else f"{d}: {e}"
                                     for d, e in zip(group["run_dataset"], group["error"])])
        rows.append({**dict(zip(keys, key)), "run_dataset": ", ".join(group["run_dataset"]), **combined(blamed)})
    return pd.DataFrame(rows, columns=long.columns)


def add_derived(long: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Per-seed averages over columns (avg_mono ...), for rows that have all their parts in the grid."""
    keys = [*grid.index, "method_id", "seed"]
    extra = []
    for name, parts in grid.derived.items():
        for key, group in long[long["column"].isin(parts)].groupby(keys, sort=False):
            by_column = group.set_index("column")
            if set(by_column.index) != set(parts):
                continue
            extra.append({**dict(zip(keys, key)), "column": name, **combined(by_column)})
    return pd.concat([long, pd.DataFrame(extra, columns=long.columns)], ignore_index=True) if extra else long


# --- aggregating ---------------------------------------------------------------------------

def read_reference(grid: Grid, root: Path = PROJECT_ROOT) -> tuple[pd.DataFrame, list[str]]:
    """The paper's numbers in long form (index columns, column, paper) and the CSV's column order."""
    path = Path(grid.reference["file"])
    table = pd.read_csv(path if path.is_absolute() else root / path, dtype=str)
    where = grid.reference.get("where") or {}
    for key, value in where.items():
        table = table[table[key] == str(value)]
    keys = [k for k in grid.index if k in table.columns]
    columns = [c for c in table.columns if c not in keys and c not in where]
    long = table.melt(id_vars=keys, value_vars=columns, var_name="column", value_name="paper")
    long["paper"] = pd.to_numeric(long["paper"], errors="coerce")
    for key in grid.index:
        if key not in long.columns:  # a constant row key the CSV spells as a filter (Tables 5-7)
            long[key] = str(grid.index[key])
    return long, columns


def summarize(long: pd.DataFrame, grid: Grid, reference: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """One row per (table row, column): n, expected seeds, mean, std, paper, diff, status, error, values."""
    keys = [*grid.index, "column", "method_id"]
    out = []
    for key, group in long.groupby(keys, sort=False):
        ok = group[group["status"] == OK]
        values = [float(v) for v in ok["score"]]
        n = len(values)
        status = OK if n else FAILED if (group["status"] == FAILED).any() else MISSING
        errors = group.loc[group["status"] != OK, "error"].dropna()
        out.append({**dict(zip(keys, key)), "n": n, "expected": len(group),
                    "mean": sum(values) / n if n else math.nan,
                    "std": pd.Series(values).std(ddof=1) if n >= 2 else math.nan,
                    "status": status, "error": errors.iloc[0] if len(errors) else None,
                    "seeds": ",".join(str(s) for s in ok["seed"]), "values": values,
                    "warned": int(ok["warning"].notna().sum()), "commits": joined(ok["code"]),
                    "config_hashes": joined(ok["config_hash"])})
    summary = pd.DataFrame(out)
    if reference is not None and len(summary):
        summary = summary.merge(reference, on=[*grid.index, "column"], how="left")
    else:
        summary["paper"] = math.nan
    summary["diff"] = summary["mean"] - summary["paper"]
    summary["p_control"] = against_control(summary, grid)
    return summary


def method_key(grid: Grid) -> Optional[str]:
    return next((k for k, t in grid.index.items() if "{method" in t), None)


def group_keys(grid: Grid) -> list[str]:
    """The row keys other than the method: the rows one significance test compares."""
    return [k for k in grid.index if k != method_key(grid)]


def welch(a: Sequence[float], b: Sequence[float]) -> float:
    """Welch's two-sided p over seeds; NaN when a side has fewer than two."""
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue) if len(a) >= 2 and len(b) >= 2 else math.nan


def against_control(summary: pd.DataFrame, grid: Grid) -> pd.Series:
    """Each entry's Welch p against ``compare.control``'s entry in its column and row group (else NaN)."""
    control, keys = grid.compare.get("control"), [*group_keys(grid), "column"]
    if not control or summary.empty:
        return pd.Series(math.nan, index=summary.index, dtype=float)
    theirs = {tuple(row[keys]): row["values"] for _, row in summary[summary["method_id"] == control].iterrows()}
    return pd.Series([math.nan if row["method_id"] == control or is_dev(row["column"]) or tuple(row[keys]) not in theirs
                      else welch(row["values"], theirs[tuple(row[keys])]) for _, row in summary.iterrows()],
                     index=summary.index, dtype=float)


def significance(summary: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Per row group and column: the compared method vs the best baseline (highest mean), Welch's p."""
    keys = group_keys(grid)
    columns = [*keys, "column", "method_id", "best", "n_method", "n_best", "p_value"]
    target, baselines = grid.compare.get("method"), set(grid.compare.get("baselines", []))
    if not target or method_key(grid) is None or summary.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, part in summary[~summary["column"].map(is_dev)].groupby([*keys, "column"], sort=False):
        ours = part[part["method_id"] == target]
        rivals = part[part["method_id"].isin(baselines) & (part["n"] > 0)]
        if ours.empty or rivals.empty:
            continue
        best = rivals.loc[rivals["mean"].idxmax()]
        a, b = ours.iloc[0]["values"], best["values"]
        rows.append({**dict(zip([*keys, "column"], key)), "method_id": target, "best": best["method_id"],
                     "n_method": len(a), "n_best": len(b), "p_value": welch(a, b)})
    return pd.DataFrame(rows, columns=columns)


# --- rendering -----------------------------------------------------------------------------

def _num(x: float) -> str:
    return DASH if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def shorten(text: str, width: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def entry_text(row: pd.Series, with_paper: bool = True) -> str:
    """``mean ± std (paper; diff) [n=k] [p=…] [warned: k]``, ``FAILED: error (paper)`` or ``— (paper)``."""
    ok = row["status"] == OK
    paper = ""
    if with_paper:
        diff = f"; {row['diff']:+.2f}" if ok and not math.isnan(row["paper"]) else ""
        paper = f" ({_num(row['paper'])}{diff})"
    if ok:
        ours = _num(row["mean"]) + (f" ± {row['std']:.2f}" if row["n"] >= 2 else "")
        count = f" [n={row['n']}]" if row["n"] != row["expected"] else ""
        warned = f" [warned: {row['warned']}]" if row.get("warned") else ""
        control = f" [p={row['p_control']:.2g}]" if not math.isnan(row.get("p_control", math.nan)) else ""
        return f"{ours}{paper}{count}{control}{warned}"
    if row["status"] == FAILED:
        return f"FAILED: {shorten(row['error'])}{paper}"
    return f"{DASH}{paper}"


def wide_table(summary: pd.DataFrame, sig: pd.DataFrame, grid: Grid, reference_columns: list[str]) -> pd.DataFrame:
    """The paper's layout: a row per index, the reference's columns then ours, each beside its dev F1; p rows."""
    present = list(dict.fromkeys(summary["column"]))
    tests = [c for c in reference_columns if c in present] + [c for c in present
                                                               if c not in reference_columns and not is_dev(c)]
    columns = [c for test in tests for c in (test, test + DEV) if c in present]
    paper = bool(grid.reference.get("file"))
    texts = summary.assign(text=[entry_text(row, paper and not is_dev(row["column"])) for _, row in summary.iterrows()])
    table = texts.pivot_table(index=list(grid.index), columns="column", values="text", aggfunc="first", sort=False)
    table = table.reindex(columns=columns).fillna("").reset_index()
    mkey, keys = method_key(grid), group_keys(grid)
    if sig.empty or mkey is None:
        return table
    label = f"p: {grid.method_names.get(grid.compare['method'], grid.compare['method'])} vs best baseline"
    out = []
    for group, part in table.groupby(keys, sort=False) if keys else [((), table)]:
        group = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        out.append(part)
        found = sig[(sig[list(group)] == pd.Series(group)).all(axis=1)] if group else sig
        if found.empty:
            continue
        p_row = {**group, mkey: label}
        for _, s in found.iterrows():
            name = grid.method_names.get(s["best"], s["best"])
            p_row[s["column"]] = f"{name}: " + ("n/a" if math.isnan(s["p_value"]) else f"p={s['p_value']:.3g}")
        out.append(pd.DataFrame([p_row], columns=table.columns).fillna(""))
    return pd.concat(out, ignore_index=True)


def markdown_table(table: pd.DataFrame) -> str:
    head, *rows = ["| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |"
                   for row in [table.columns, *table.itertuples(index=False)]]
    return "\n".join([head, "|" + "---|" * len(table.columns), *rows])


LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 "±": r"$\pm$", DASH: "---", "…": r"\dots{}"}


def latex_table(table: pd.DataFrame, caption: str) -> str:
    def esc(x) -> str:
        return "".join(LATEX_ESCAPES.get(ch, ch) for ch in str(x))

    lines = [r"\begin{table*}[t]", r"\centering", r"\small", r"\begin{tabular}{" + "l" * len(table.columns) + "}",
             r"\toprule", " & ".join(map(esc, table.columns)) + r" \\", r"\midrule"]
    lines += [" & ".join(map(esc, row)) + r" \\" for row in table.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{esc(caption)}}}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def plot(summary: pd.DataFrame, grid: Grid, path: Path) -> Optional[Path]:
    """Ours (mean ± std, solid) and the paper (dashed) for each plotted column."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_key, ys = grid.plot.get("x"), [y for y in grid.plot.get("y", []) if y in set(summary["column"])]
    if not x_key or not ys:
        return None
    series_keys = [k for k in grid.index if k != x_key and summary[k].nunique() > 1]
    xs = list(dict.fromkeys(summary[x_key]))  # evenly spaced, in grid order (gold sizes grow ~2x)
    position = {x: i for i, x in enumerate(xs)}
    fig, axes = plt.subplots(1, len(ys), figsize=(4.5 * len(ys), 3.6), squeeze=False)
    for ax, y in zip(axes[0], ys):
        part = summary[summary["column"] == y]
        groups = part.groupby(series_keys, sort=False) if series_keys else [("ours", part)]
        for i, (name, g) in enumerate(groups):
            color = f"C{i % 10}"
            label = " ".join(name) if isinstance(name, tuple) else str(name)
            g = g.assign(pos=g[x_key].map(position)).sort_values("pos")
            have = g[g["n"] > 0]
            ax.errorbar(have["pos"], have["mean"], yerr=have["std"], color=color, marker="o",   # 1 seed: no bar
                        capsize=3, label=label)
            ax.plot(g["pos"], g["paper"], color=color, linestyle="--", marker="x", alpha=0.6)
        ax.set_title(y)
        ax.set_xlabel(x_key)
        ax.set_xticks(list(position.values()), xs, rotation=30 if len(xs) > 4 else 0)
    axes[0][0].legend(fontsize="small", title="solid: ours, dashed: paper", title_fontsize="small")
    fig.suptitle(grid.title, fontsize="medium")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


#: config keys that place a run in the table (its row and column), not settings of the method
PLACE = ("dataset", "language", "gold", "method", "profile", "test_datasets")
#: keys every table states for the methods that have them, equal across runs or not: values the paper does not
#: give (mixner's sigma), and what decides how a number reads (the generator's weights, the decoding constraint)
STATED = ("generation.mixner.mode", "generation.mixner.gamma_sigma", "generator.model", "mulda.model",
          "generation.constrained", "daga.constrained", "mulda.constrained")


def settings_notes(runs: Sequence[Run]) -> list[str]:
    """Per method, the :data:`STATED` keys and those whose values differ between its runs (``key=a | b``): a table
    never mixes settings silently.  A generator from models/tiny is marked as random weights."""
    configs: dict[str, list[dict[str, str]]] = {}
    for run in runs:
        if run.result is not None:
            configs.setdefault(run.method, []).append({k: v for k, v in compared(run.config)
                                                       if k.split(".")[0] not in PLACE})
    notes = []
    for method, found in configs.items():
        stated = [k for k in STATED if any(k in c for c in found)]
        keys = stated + [k for k in differing(found) if k not in stated]
        values = {k: " | ".join(sorted({shown(c.get(k)) for c in found})) for k in keys}
        if keys:
            notes.append(f"Settings of {method}: " + ", ".join(
                f"{k}={v}" + (" (random weights: generated text means nothing)" if "models/tiny/" in v else "")
                for k, v in values.items()) + ".")
    return notes


#: What a family of MultiCoNER test sets is, said beside the paper's (the slices and the release differ only by name).
TEST_SET_KINDS = {
    "multiconer/": "the held-out 2,000-sentence slices of the MultiCoNER v1 train sets (multiconer/<lang>), "
                   "not the official test sets",
    "multiconer_official/": "the official MultiCoNER v1 test sets (multiconer_official/<lang>)",
}


def test_sets(paper: Optional[str], runs: Sequence[Run]) -> str:
    """Which test sets the paper's numbers (the grid's ``reference.test_set``) and ours come from, ours as the runs
    recorded them, so a table on the held-out slices never passes for one on the official test sets."""
    specs = registry()
    counts: dict[str, set[int]] = {}
    kinds: dict[str, None] = {}
    for run in runs:
        spec = specs.get(run.dataset)
        planned = (spec.union if spec else None) or [run.dataset]
        scored = tested_sizes(run.result or {})
        for name in planned:
            counts.setdefault(name, set())
        for name, n in scored.items():
            counts.setdefault(name, set()).add(n)
        kinds.update(dict.fromkeys(kind for name in scored or planned
                                   for prefix, kind in TEST_SET_KINDS.items() if name.startswith(prefix)))
    files = {name: (specs[name].test or "no test file") if name in specs else "a dataset folder" for name in counts}
    ours = [f"{name} ({files[name]}, "
            + (f"{' or '.join(map(str, sorted(ns)))} sentences)" if ns else "no run scored yet)")
            for name, ns in counts.items()]
    what = f" Ours are {' and '.join(kinds)}." if kinds else ""
    return "Test sets. " + (f"Paper: {paper}. " if paper else "") + f"Ours: {'; '.join(ours)}." + what


def averaging_note(grid: Grid, runs: Sequence[Run]) -> list[str]:
    """The datasets an averaged grid's entries cover, so a sliced run never passes for the full average."""
    if not grid.average_datasets or not runs:
        return []
    covered = sorted({run.dataset for run in runs})
    return [f"Entries: per seed, the mean over {len(covered)} datasets ({', '.join(covered)}); "
            f"a seed counts only when all of them have a value."]


def annotate_more(grid: Grid, runs: Sequence[Run]) -> list[Run]:
    """``runs`` with Gold-only at 2N gold as a row of size N wherever the grid ran both: what annotating N more buys
    (Table 1: ACLM at 100 gold 39.47, Gold-only at 200 38.06).  Never compared with the paper; the 2N run may come
    from another block of the same dataset and overrides."""
    if not any("{gold}" in template for template in grid.index.values()):
        return list(runs)

    def setting(run: Run, gold) -> tuple:
        return run.dataset, repr(sorted(grid.blocks[run.block].overrides.items())), gold, run.seed

    plain = {setting(r, r.gold): r for r in runs if r.method == GOLD_ONLY and not r.sweep}
    out = []
    for run in runs:
        out.append(run)
        twice = plain.get(setting(run, run.gold * 2)) if isinstance(run.gold, int) else None
        if run.method == GOLD_ONLY and not run.sweep and twice is not None:
            out.append(replace(twice, gold=run.gold, method=ANNOTATE_MORE, block=run.block))
    return out


def chosen_on_dev(grid: Grid, runs: Sequence[Run]) -> tuple[list[Run], list[str]]:
    """The runs as the table shows them: in a block choosing on dev, each (setting, method, seed)'s sweep point with
    the best dev F1 (the first on a tie or with none scored) stands for the method; and notes of what was chosen."""
    kept, points = [], {}
    for run in runs:
        if grid.blocks[run.block].choose == "dev":
            points.setdefault((run.block, run.dataset, str(run.gold), run.method, run.seed), []).append(run)
        else:
            kept.append(run)
    curves: dict[tuple, dict[str, list[float]]] = {}
    choices: dict[tuple, list[str]] = {}
    for (block, dataset, gold, method, seed), group in points.items():
        scored = [(dev, i) for i, dev in enumerate(lookup(r.result, "dev_f1") if r.status == OK and r.result else None
                                                    for r in group) if dev is not None]
        best = group[max(scored, key=lambda pair: (pair[0], -pair[1]))[1]] if scored else group[0]
        kept.append(replace(best, sweep=""))
        setting = (dataset, gold, grid.method_names.get(method, method), grid.blocks[block].sweep_key)
        choices.setdefault(setting, []).append(f"{best.sweep} (seed {seed})" if scored else f"none (seed {seed})")
        for dev, i in scored:
            curves.setdefault(setting, {}).setdefault(group[i].sweep, []).append(dev)
    notes = [f"Chosen on dev ({setting[3]}), {setting[0]} gold {setting[1]}, {setting[2]}: {', '.join(chosen)}; "
             + "dev F1 a point: " + ", ".join(f"{label} {sum(v) / len(v):.2f}"
                                           for label, v in curves.get(setting, {}).items()) + "."
             for setting, chosen in choices.items()]
    return kept, notes


def recorded(runs: Sequence[Run], key: str) -> dict[str, list]:
    """Per method (id), what its finished runs recorded under ``key`` (runs that recorded none left out)."""
    found: dict[str, list] = {}
    for run in runs:
        if run.result is not None and run.result.get(key):
            found.setdefault(method_id(run), []).append(run.result[key])
    return found


def runtime_note(grid: Grid, runs: Sequence[Run]) -> list[str]:
    """Per method, a run's mean wall time over every stage of its chain, the shared S0 and S1 counted whole."""
    seconds = {m: [sum(t.values()) for t in timings] for m, timings in recorded(runs, "timings").items()}
    parts = [f"{grid.method_names.get(m, m)} {sum(t) / len(t) / 60:.1f} ({len(t)})" for m, t in seconds.items()]
    return ["Runtime: mean minutes a run, every stage of its chain with the shared S0 and S1 (runs): "
            + ", ".join(parts) + "."] if parts else []


def parameters_note(grid: Grid, runs: Sequence[Run]) -> list[str]:
    """Per method, the trainable parameters a run fine-tunes (:mod:`aclm.tables.parameters`)."""
    parts = [f"{grid.method_names.get(m, m)} {parameters_line(m, configs[0])}"
             for m, configs in recorded(runs, "config").items()]
    return ["Trainable parameters a run fine-tunes (whole models; the tagger's linear head aside): "
            + "; ".join(parts) + "."] if parts else []


def code_notes(long: pd.DataFrame, grid: Grid) -> list[str]:
    """Which code made the results: each commit (and uncommitted diff's digest) with its count of runs."""
    ran = long[long["status"] == OK].drop_duplicates([*grid.index, "method_id", "seed", "run_dataset"])
    if ran.empty:
        return []
    counts = ran["code"].fillna("not recorded").value_counts().sort_index()
    return ["Code: " + ", ".join(f"{code} ({n} run{'s' * (n != 1)})" for code, n in counts.items())
            + (f" ({UNCOMMITTED}: the digest of a run's uncommitted changes)"
               if any(UNCOMMITTED in code for code in counts.index) else "")
            + "; each entry's in the CSV (commits, config_hashes)."]


def run_lines(rows: pd.DataFrame, grid: Grid, text: str) -> list[str]:
    """``- <row> <column> seed <s>: <message>`` per run and message; one shared by a run's columns is said once."""
    rows = rows.drop_duplicates([*grid.index, "method_id", "seed", "run_dataset", text])
    return [f"- {' '.join(str(r[k]) for k in grid.index)} {r['column']} seed {r['seed']}: {shorten(r[text], 300)}"
            for _, r in rows.iterrows()]


def markdown_report(grid: Grid, profile: str, table: pd.DataFrame, summary: pd.DataFrame, long: pd.DataFrame,
                    notes: Optional[list[str]] = None) -> str:
    summary, long = summary[summary["method_id"] != ANNOTATE_MORE], long[long["method_id"] != ANNOTATE_MORE]
    counts = summary[~summary["column"].map(is_dev)].groupby("status").size().to_dict()   # (its runs are Gold-only's)
    long = long[~long["column"].isin(grid.derived)]        # a derived column repeats its parts' runs
    runs = long.drop_duplicates([*grid.index, "method_id", "seed", "run_dataset"]).groupby("status").size().to_dict()
    entry = "mean ± std over seeds" + (" (paper; ours − paper)" if grid.reference.get("file") else "")
    lines = [f"## {grid.title}", "",
             f"Profile `{profile}`; entries ok {counts.get(OK, 0)}, failed {counts.get(FAILED, 0)}, "
             f"missing {counts.get(MISSING, 0)}; runs failed {runs.get(FAILED, 0)}, missing {runs.get(MISSING, 0)}. "
             f"Entry: {entry}, [n=k] when only k of the seeds asked for are in, [warned: k] when k of them finished "
             f"with a warning (below); {DASH} missing."
             + (f" `<column>{DEV}`: the dev F1 of that column's runs, the score their model selection used."
                if grid.shows_dev else "")]
    if grid.compare.get("method"):
        lines.append("p: two-sided Welch's t-test of the compared method against the baseline with the highest "
                     "mean in that column and group (n/a: fewer than 2 seeds on a side).")
    if grid.compare.get("control"):
        control = grid.method_names.get(grid.compare["control"], grid.compare["control"])
        lines.append(f"[p=…]: two-sided Welch's t-test of the entry against {control} in the same column and "
                     f"group (none: fewer than 2 seeds on a side).")
    lines += ["", markdown_table(table)]
    notes = [*(notes or []), *code_notes(long, grid)]
    if notes:
        lines += ["", *notes]
    warned = long[(long["status"] == OK) & long["warning"].notna()]
    if len(warned):
        lines += ["", "Warnings (the runs finished and count in their entries):", *run_lines(warned, grid, "warning")]
    failures = long[(long["status"] != OK) & long["error"].notna()]
    if len(failures):
        lines += ["", "Failures and gaps:", *run_lines(failures, grid, "error")]
    return "\n".join(lines) + "\n"


@dataclass
class Report:
    markdown: str
    summary: pd.DataFrame
    significance: pd.DataFrame
    table: pd.DataFrame
    caption: str          # the LaTeX caption: the title and the test sets
    tested: Optional[str] = None   # the test sets of the paper and ours (:func:`test_sets`), a column of the CSV


def build_report(grid: Grid, cells: list[Cell], profile: str, perplexity_fn: Optional[PerplexityFn] = None,
                 root: Path = PROJECT_ROOT) -> Report:
    """A paper table: the grid's cells beside its reference CSV (a grid naming no test set, Table 3, says none)."""
    runs, paper = [of_cell(cell) for cell in cells], grid.reference.get("test_set")
    reference, columns = read_reference(grid, root)
    return assemble(grid, runs, profile, reference, columns, test_sets(paper, runs) if paper else None, perplexity_fn)


def assemble(grid: Grid, runs: Sequence[Run], profile: str, reference: Optional[pd.DataFrame],
             reference_columns: list[str], tested: Optional[str], perplexity_fn: Optional[PerplexityFn] = None,
             notes: Sequence[str] = ()) -> Report:
    """The report of ``runs`` laid out by ``grid``, beside ``reference`` (the paper's numbers; None: none)."""
    shown, choices = chosen_on_dev(grid, runs)
    long = collect(grid, annotate_more(grid, shown), perplexity_fn)
    summary = summarize(long, grid, reference)
    sig = significance(summary, grid)
    table = wide_table(summary, sig, grid, reference_columns)
    notes = [*([tested] if tested else []), *averaging_note(grid, runs), *settings_notes(runs), *choices,
             *runtime_note(grid, runs), *parameters_note(grid, runs), *notes]
    caption = f"{grid.title}. {tested}" if tested else grid.title
    return Report(markdown_report(grid, profile, table, summary, long, notes), summary, sig, table, caption, tested)


def write_report(report: Report, grid: Grid, out_dir: Path) -> list[Path]:
    """``<table>.md``, ``.csv`` (one row per entry, with p-values), ``.tex`` and ``.png`` under ``out_dir``."""
    stem = Path(out_dir) / grid.name
    csv = report.summary.drop(columns=["values"]).merge(
        report.significance.rename(columns={"best": "best_baseline"}),
        on=[*group_keys(grid), "column", "method_id"], how="left")
    if report.tested:     # a CSV read on its own still says which test sets each side's numbers come from
        csv["test_sets"] = report.tested
    texts = {".md": report.markdown, ".csv": csv.to_csv(index=False), ".tex": latex_table(report.table, report.caption)}
    for suffix, text in texts.items():
        atomic_write_text(stem.with_suffix(suffix), text)
    png = plot(report.summary, grid, stem.with_suffix(".png"))
    return [stem.with_suffix(suffix) for suffix in texts] + ([png] if png else [])


# --- Table 3: perplexity of each run's augmentations ----------------------------------------

class PerplexityCache:
    """Perplexity per (aug.conll content, model and its weights, mode, scoring code), kept in a JSON file so that
    re-aggregating is free; new weights under the same name, or edited scoring code, score again."""

    def __init__(self, path: Path, mode: str = "sentence", device: Optional[str] = None):
        self.path, self.mode, self.device = Path(path), mode, device
        self.values: dict = read_json(self.path) if self.path.exists() else {}
        self.code = code_digests([perplexity.__module__])

    def __call__(self, run: Run) -> Optional[float]:
        if not run.aug_path.exists():
            return None
        analysis = run.config["analysis"]
        model = analysis["perplexity_model"]
        identity = {"augmentations": sha256_path(run.aug_path), "model": model, "mode": self.mode,
                    "weights": model_reads({"perplexity_model": model}), "code": self.code}
        key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
        if key not in self.values:
            # a method that kept no augmentation writes an empty aug.conll (perplexity None)
            texts = [" ".join(s.tokens) for s in outputs.augmentations(run.aug_path.parent)]
            self.values[key] = perplexity(texts, model, analysis["batch_size"], self.device, self.mode)
            write_json(self.path, self.values)
        return self.values[key]
