#!/usr/bin/env python
"""Train and evaluate the NER tagger for one setting (S1, or S7 after augmentation).

    python scripts/ner.py profile=tiny dataset=multiconer/en gold=100 seed=1
    python scripts/ner.py profile=tiny method=aclm ...     # S7 on gold + ACLM's augmentations
    python scripts/ner.py ner.tagger=bilstm_crf ...        # WikiNEuRal's BiLSTM-CRF tagger

With method=gold_only (the default) it cuts the gold sample (S0) and trains the
gold model (S1), which is also the Gold-only baseline. With any other method it
trains on <run>/<method>/s6_postprocess/gold+aug.conll (running the method's
stages first when needed). Either way the model is then scored on the test
set(s) in its own stage (s1_eval/ or s7_eval/, which holds result.json).
"""

from aclm.run.cli import stage_script

if __name__ == "__main__":
    stage_script(__doc__, None, "result")
