#!/usr/bin/env python
"""S2: select keywords from the gold NER model's attention maps (runs S0-S1 first if needed).

    python scripts/keywords.py profile=tiny method=aclm dataset=multiconer/en gold=100 seed=1
    python scripts/keywords.py method=aclm keywords.layers=8-11 keywords.p=0.4 ...

Writes <run>/<method>/s2_keywords/{train,dev}.jsonl: per sentence its keyword
word indices, the attention each candidate receives from the entities, and a
status (ok, no_entity, too_long, failed). method=aclm_random / aclm_only_entity
select the variants."""

from aclm.stages import layout
from aclm.run.cli import stage_script

if __name__ == "__main__":
    stage_script(__doc__, layout.S2, "keywords")
