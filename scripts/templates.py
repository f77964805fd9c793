#!/usr/bin/env python
"""S3: build templates (selective masking + labeled linearization) from S2's keywords.

    python scripts/templates.py profile=tiny method=aclm dataset=multiconer/en gold=100 seed=1

Writes <run>/<method>/s3_templates/{train,dev}.jsonl: per sentence the skeleton
(entity, keyword and mask pieces), the linearized target, the static template
and one dynamically masked example. Dynamic masking itself is redrawn in S4
(every epoch) and S5 (every round)."""

from aclm.stages import layout
from aclm.run.cli import stage_script

if __name__ == "__main__":
    stage_script(__doc__, layout.S3, "templates")
