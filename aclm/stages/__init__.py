"""The method's stages, one module each, declared once at import over the steps of :mod:`aclm.steps`: gold
(S0), ner (S1, S7), scores (a tagger on the test sets), keywords (S2), templates (S3), generator (S4),
generation (S5), augment (a baseline's one stage), postprocess (S6); with the run folder's layout and the one
reader of each stage's files (outputs).  A stage's code identity is its module and what that imports."""
