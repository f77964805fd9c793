"""A table's artifacts in one folder another researcher can take: what each cell trained on and predicted.

``<out>/<profile>/<table>/`` holds a README card, ``index.jsonl`` (one line per cell) and, per cell under
``cells/<dataset>/gold<N>/seed<S>/<method>[@<variant>]/``, its gold sample, training set, augmentations, S6
report, predictions, result.json and MODEL_CARD.md (:func:`card` says what each is; usage: docs/reproducing.md).
Files are copied, not linked, so the folder (or its ``.tar.gz``) stands alone.  A cell that failed or never ran
has an index line saying so and no files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional, Sequence

from aclm.base.io import atomic_write_text
from aclm.experiments.grid import Cell, Grid
from aclm.engine.identity import STAMP
from aclm.engine.stages import stamp
from aclm.stages import layout
from aclm.tables.parameters import parameters_line
from aclm.tables.aggregate import test_sets
from aclm.tables.runs import OK, Run, method_id, of_cell

CARD = "MODEL_CARD.md"
#: The same fields on every index line, so that a datasets.Dataset gets one schema.
FIELDS = ("table", "profile", "dataset", "gold", "seed", "method", "variant", "status", "error", "f1",
          "folder", "gold_train", "gold_dev", "train", "augmentations", "s6_report", "predictions", "result",
          "commit", "dirty")


def export_table(grid: Grid, cells: Sequence[Cell], profile: str, out: Path, tar: bool = False) -> Path:
    """Copy every cell's artifacts, the index and the card under ``out/<profile>/<table>``; the folder or tarball."""
    root = Path(out) / profile / grid.name
    shutil.rmtree(root, ignore_errors=True)
    runs = [of_cell(cell) for cell in cells]      # as the table reads them: a stale result is missing
    lines = [export_cell(grid, cell, run, profile, root) for cell, run in zip(cells, runs)]
    atomic_write_text(root / "index.jsonl", "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    atomic_write_text(root / "README.md", card(grid, cells, runs, profile, lines))
    if tar:
        return Path(shutil.make_archive(str(root), "gztar", root_dir=root.parent, base_dir=root.name))
    return root


def export_cell(grid: Grid, cell: Cell, run: Run, profile: str, root: Path) -> dict:
    """Copy one cell's files; its index line."""
    here = cell.layout
    folder = Path("cells") / cell.dataset / f"gold{cell.gold}" / f"seed{cell.seed}" / method_id(cell)
    line = {**dict.fromkeys(FIELDS), "table": grid.name, "profile": profile, "dataset": cell.dataset,
            "gold": str(cell.gold), "seed": cell.seed, "method": cell.method, "variant": cell.variant,
            "status": run.status, "error": run.error, "predictions": []}
    if run.status != OK:
        return line
    target = root / folder
    copies = {"gold_train": (here.stage(layout.DATA) / layout.gold_file("train"), "gold/train.conll"),
              "gold_dev": (here.stage(layout.DATA) / layout.gold_file("dev"), "gold/dev.conll"),
              "result": (here.result_path, layout.RESULT)}
    if cell.method != layout.GOLD_ONLY:
        s6 = here.stage(layout.S6)
        copies.update(train=(s6 / layout.GOLD_AUG, layout.GOLD_AUG), augmentations=(s6 / layout.AUG, layout.AUG),
                      s6_report=(s6 / layout.REPORT, layout.REPORT))
    for field, (source, name) in copies.items():
        line[field] = _copy(source, target / name, folder / name)
    for predictions in sorted((here.result_path.parent / layout.PREDICTIONS).glob("*.conll")):
        name = Path(layout.PREDICTIONS) / predictions.name
        line["predictions"].append(_copy(predictions, target / name, folder / name))
    atomic_write_text(target / CARD, model_card(cell, run))
    checkout = run.result.get("checkout") or {}
    line.update(f1=run.result["f1"], folder=str(folder), commit=checkout.get("commit"), dirty=checkout.get("dirty"))
    line["train"] = line["train"] or line["gold_train"]             # Gold-only trains on the gold sample
    return line


def model_card(cell: Cell, run: Run) -> str:
    """One run told as the ACL checklist asks: what it trained on and with what, its scores with the dev score
    its selection used, the command, the machine, the libraries and the code."""
    result = run.result
    tagger_stage = cell.layout.stage(layout.S1 if cell.method == layout.GOLD_ONLY else layout.S7)
    trained_on = stamp(tagger_stage) if (tagger_stage / STAMP).exists() else {}
    made_by = trained_on.get("checkout") or result.get("checkout") or {}
    hardware = made_by.get("hardware")
    training = result.get("training") or {}
    sizes = result.get("sizes") or {}
    tests = "; ".join(f"{name} {scores['f1']:.2f}" for name, scores in (result.get("test") or {}).items())
    versions = ", ".join(f"{k} {v}" for k, v in (result.get("versions") or {}).items())
    return "\n".join([
        f"# {method_id(cell)} on {cell.dataset}, {cell.gold} gold sentences, seed {cell.seed}", "",
        f"- **Trained on:** {sizes.get('train', '?')} sentences ({sizes.get('gold', '?')} gold), dev "
        f"{sizes.get('dev', '?')} sentences; `{layout.GOLD_AUG if cell.method != layout.GOLD_ONLY else 'gold'}`.",
        f"- **Models it fine-tunes:** {parameters_line(cell.method, result.get('config') or {})} trainable "
        f"parameters (tagger `{(result.get('config') or {}).get('ner', {}).get('model')}`).",
        f"- **Training:** {training.get('epochs_trained', '?')} of {training.get('max_epochs', '?')} epochs "
        f"({training.get('stop_reason', 'not recorded')})"
        + (f"; learning rate {training['chosen_lr']} chosen on dev from {training['dev_f1_by_lr']}"
           if "chosen_lr" in training else "") + ".",
        f"- **Scores (span F1, %):** test {result.get('f1', float('nan')):.2f} on {cell.dataset}, dev "
        f"{result.get('dev_f1', float('nan')):.2f} (the model selection's); every test set: {tests}.",
        f"- **Command:** `{made_by.get('command', 'not recorded')}` (the tagger's; `result.json` has the config).",
        "- **Hardware:** " + (f"{hardware['cpu']}, {hardware['cores']} cores, GPU {hardware['gpu'] or 'none'} "
                              f"({hardware['system']})" if hardware else "not recorded (a run older than the record)")
        + ".",
        f"- **Libraries:** {versions or 'not recorded'}.",
        f"- **Code:** {made_by.get('commit') or 'not recorded'}"
        + (" with uncommitted changes" if made_by.get("dirty") else "") + ".", ""])


def _copy(source: Path, target: Path, name: Path) -> Optional[str]:
    if not source.exists():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return str(name)


def card(grid: Grid, cells: Sequence[Cell], runs: Sequence[Run], profile: str, lines: Sequence[dict]) -> str:
    """The folder's README: what it holds, where it comes from, and what is not in it."""
    done = [line for line in lines if line["status"] == "ok"]
    commits = sorted({f"{line['commit'] or 'not recorded'}{' (uncommitted changes)' if line['dirty'] else ''}"
                      for line in done})
    not_done = [f"- {line['method']}{'@' + line['variant'] if line['variant'] else ''} on {line['dataset']}, gold "
                f"{line['gold']}, seed {line['seed']}: {line['status']}{': ' + line['error'] if line['error'] else ''}"
                for line in lines if line["status"] != "ok"]
    ran = [run for run in runs if run.status == OK]
    return "\n".join([
        f"# {grid.title}: the runs' artifacts", "",
        f"Profile `{profile}`; {len(done)} of {len(lines)} cells ran. Made by `scripts/export_table.py "
        f"{grid.name}` from the runs under `{cells[0].runs if cells else ''}`.", "",
        "Code: " + ("; ".join(f"`{c}`" for c in commits) or "no run recorded its commit") + ".", "",
        test_sets(grid.reference.get("test_set"), ran), "",
        "## Files", "",
        "`index.jsonl` has one line per cell (`datasets.load_dataset(\"json\", data_files=\"index.jsonl\")`); "
        "its paths are relative to this folder. Each cell's folder holds:", "",
        "- `gold/train.conll`, `gold/dev.conll`: the gold sample the run drew (S0), one `word<TAB>tag` a line;",
        "- `gold+aug.conll`: what the cell's final tagger trained on (S6: the gold sample, then the augmentations);",
        "- `aug.conll`: the augmentations alone; `report.json`: what S6 counted, kept and dropped, and why;",
        "- `predictions/<test set>.conll`: `word<TAB>gold tag<TAB>predicted tag` of the scored tagger;",
        "- `result.json`: the scores (overall, per type, per length, per test set), the whole config, the "
        "timings and the checkout that ran it;",
        f"- `{CARD}`: the run in words: data, the models it fine-tunes and their parameters, scores beside the dev "
        "score, the command, the hardware, the libraries and the commit.", "",
        "A Gold-only cell has no augmentations: its tagger trained on `gold/train.conll`.", "",
        *(["## Not in this folder", "", *not_done, ""] if not_done else []),
    ])
