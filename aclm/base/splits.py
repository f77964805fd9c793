"""Low-resource samples by iterative stratified sampling (scikit-multilearn), SPEC §1.

Each sentence's target is its set of entity types, so a sample keeps the full set's type mix.
"""

from __future__ import annotations

import numpy as np

from aclm.base.data import TaggedSentence, entity_types, type_counts


def label_matrix(sentences: list[TaggedSentence], types: list[str]) -> np.ndarray:
    index = {t: i for i, t in enumerate(types)}
    y = np.zeros((len(sentences), len(types)), dtype=np.int8)
    for row, s in enumerate(sentences):
        for t in s.entity_types:
            y[row, index[t]] = 1
    return y


def stratified_indices(sentences: list[TaggedSentence], size: int, seed: int) -> list[int]:
    """Indices of an approximately ``size``-sentence stratified sample (sorted)."""
    n = len(sentences)
    if not 0 < size < n:
        raise ValueError(f"cannot draw {size} of {n} sentences: a sample holds 1 sentence or more and fewer than "
                         f"all {n} (all of them: gold=full)")
    types = sorted(entity_types(sentences))
    y = label_matrix(sentences, types)
    # scikit-multilearn 0.2 ignores random_state; its draw depends on row order (ties use numpy's
    # global generator), so the seed shuffles the rows and seeds that generator.
    order = np.random.RandomState(seed).permutation(n)
    np.random.seed(seed)
    share = size / n
    from skmultilearn.model_selection import IterativeStratification   # scikit-learn: seconds to import

    stratifier = IterativeStratification(n_splits=2, order=1, sample_distribution_per_fold=[share, 1.0 - share])
    _, sample = next(stratifier.split(np.zeros((n, 1)), y[order]))
    return sorted(int(order[i]) for i in sample)


def sample(sentences: list[TaggedSentence], size: int, seed: int,
           exclude: set[int] = frozenset()) -> list[TaggedSentence]:
    """A stratified sample, drawn from the sentences whose index is not excluded."""
    pool = [i for i in range(len(sentences)) if i not in exclude]
    chosen = stratified_indices([sentences[i] for i in pool], size, seed)
    return [sentences[pool[i]] for i in chosen]


def type_shares(sentences: list[TaggedSentence]) -> dict[str, float]:
    """Each entity type's share of the entity mentions, in percent."""
    counts = type_counts(sentences)
    total = sum(counts.values()) or 1
    return {t: 100.0 * c / total for t, c in sorted(counts.items())}


def share_table(full: list[TaggedSentence], samples: dict[str, list[TaggedSentence]]) -> str:
    """Plain-text table of type shares: full set against each sample."""
    base = type_shares(full)
    names = list(samples)
    rows = [["type", f"full ({len(full)})"] + [f"{k} ({len(v)})" for k, v in samples.items()]]
    shares = {k: type_shares(v) for k, v in samples.items()}
    for t, share in base.items():
        rows.append([t, f"{share:.1f}"] + [f"{shares[k].get(t, 0.0):.1f} ({shares[k].get(t, 0.0) - share:+.1f})"
                                           for k in names])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)
