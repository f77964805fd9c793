#!/usr/bin/env python
"""S4: fine-tune the generator (mBART-50) to rebuild whole labeled sentences from templates.

    python scripts/generator.py profile=tiny method=aclm dataset=multiconer/en gold=100 seed=1
    python scripts/generator.py profile=reference_code method=aclm ...   # the released code's values

Writes the best-by-dev-loss model to <run>/<method>/s4_generator/ (a from_pretrained folder)."""

from aclm.stages import layout
from aclm.run.cli import stage_script

if __name__ == "__main__":
    stage_script(__doc__, layout.S4, "generator")
