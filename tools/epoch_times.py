"""A tagger's recorded epoch times, read without any library: tools/gpu_check.py's own process has only the
standard library on an offline node (the bundle is on the path of its steps alone)."""
from __future__ import annotations


def later_epochs_mean(epochs: list[dict]) -> dict[str, float]:
    """The mean training, dev-scoring and saving seconds of the epochs after the first, whose time holds the
    warm-up (CUDA kernels, the allocator); the first's own when it is the only one."""
    later = epochs[1:] or epochs
    return {part: sum(e.get(part, 0.0) for e in later) / len(later) for part in ("train", "dev", "save")}
