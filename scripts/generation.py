#!/usr/bin/env python
"""S5: generate R augmentations per training sentence with mixner.

    python scripts/generation.py profile=tiny method=aclm dataset=multiconer/en gold=100 seed=1
    python scripts/generation.py method=aclm generation.mixner.mode=code ...   # 3 plain + 2 mixed rounds

Writes <run>/<method>/s5_generation/generations.jsonl: per attempt its source,
round, mixner partner, template, decoded text and status (kept, duplicate,
duplicate, copy, malformed_<reason>)."""

from aclm.stages import layout
from aclm.run.cli import stage_script

if __name__ == "__main__":
    stage_script(__doc__, layout.S5, "generations")
