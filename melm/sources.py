"""The train files monolingual code-mixing borrows entities from (hashed as the augment stage's inputs).

Light on purpose: planning a chain hashes them without loading MELM's training libraries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig

from aclm.base.data import TaggedSentence
from aclm.base.datasets import get_spec, load_split, resolve_data_dir


def code_mix_files(c: DictConfig) -> list[Path]:
    """The train files code-mixing borrows entities from (none when it is off or multilingual)."""
    if not c.melm.code_mix:
        return []
    base = resolve_data_dir(c.data_dir)
    return [get_spec(name).path(get_spec(name).train, base) for name in c.melm.code_mix_languages]


def load_code_mix_pool(names: Sequence[str], data_dir: str, language: str) -> dict[str, list[TaggedSentence]]:
    """Training sentences of the named datasets, by language; the target language itself is refused."""
    pool: dict[str, list[TaggedSentence]] = {}
    for name in names:
        other = get_spec(name).language
        if other == language:
            raise ValueError(f"code-mixing needs other languages, but {name!r} is {language!r} like the gold data")
        pool.setdefault(other, []).extend(load_split(name, "train", data_dir) or [])
    return pool
