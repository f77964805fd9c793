#!/usr/bin/env python
"""S6: parse generations back to CoNLL, drop copies of the source, optionally filter for consistency.

    python scripts/postprocess.py profile=tiny method=aclm dataset=multiconer/en gold=100 seed=1
    python scripts/postprocess.py method=aclm postprocess.consistency_filter=true ...

Reads the method's generation stage and writes <run>/<method>/s6_postprocess/
aug.conll, gold+aug.conll and report.json (generated, dropped per reason, kept,
diversity).
"""

from aclm.stages import layout
from aclm.run.cli import stage_script

if __name__ == "__main__":
    stage_script(__doc__, layout.S6, "augmentations")
