"""Span-level NER scores with seqeval.

Default mode is conlleval's (an ``I-X`` after ``O`` opens an entity); ``strict`` (IOB2) counts
only well-formed entities.
"""

from __future__ import annotations

from typing import Sequence

from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.scheme import IOB2

LENGTH_BUCKETS = (("len_lt5", 0, 5), ("len_5_10", 5, 10), ("len_ge10", 10, None))


def _check(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> None:
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sentences but {len(pred)} predicted")
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted tags")


def _mode(strict: bool) -> dict:
    return {"mode": "strict", "scheme": IOB2} if strict else {}


def _prf(gold, pred, strict: bool = False) -> dict[str, float]:
    if not gold:
        return {"precision": None, "recall": None, "f1": None, "sentences": 0}
    kw = {"zero_division": 0, **_mode(strict)}
    return {"precision": 100 * precision_score(gold, pred, **kw),
            "recall": 100 * recall_score(gold, pred, **kw),
            "f1": 100 * f1_score(gold, pred, **kw),
            "sentences": len(gold)}


def evaluate_tags(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], strict: bool = False) -> dict:
    """Micro P/R/F1 (in percent), P/R/F1 and support per type, and P/R/F1 per sentence-length bucket."""
    gold, pred = [list(g) for g in gold], [list(p) for p in pred]
    _check(gold, pred)
    scores = _prf(gold, pred, strict)
    report = classification_report(gold, pred, output_dict=True, zero_division=0, **_mode(strict)) if gold else {}
    scores["per_type"] = {t: {"f1": 100 * r["f1-score"], "precision": 100 * r["precision"],
                              "recall": 100 * r["recall"], "support": int(r["support"])}
                          for t, r in report.items() if not t.endswith(" avg")}
    scores["per_length"] = {}
    for name, lo, hi in LENGTH_BUCKETS:
        keep = [i for i, g in enumerate(gold) if len(g) >= lo and (hi is None or len(g) < hi)]
        scores["per_length"][name] = _prf([gold[i] for i in keep], [pred[i] for i in keep], strict)
    return scores


def format_scores(scores: dict, title: str = "") -> str:
    """A plain-text table of micro scores, F1 per type and F1 per length bucket."""
    def fmt(x):
        return "  -  " if x is None else f"{x:5.2f}"

    lines = [title] if title else []
    lines.append(f"micro  P {fmt(scores['precision'])}  R {fmt(scores['recall'])}  F1 {fmt(scores['f1'])}"
                 f"  ({scores['sentences']} sentences)")
    lines += [f"  {t:<12} P {fmt(r['precision'])}  R {fmt(r['recall'])}  F1 {fmt(r['f1'])}  (support {r['support']})"
              for t, r in sorted(scores["per_type"].items())]
    lines += [f"  {b:<12} F1 {fmt(r['f1'])}  ({r['sentences']} sentences)" for b, r in scores["per_length"].items()]
    return "\n".join(lines)
