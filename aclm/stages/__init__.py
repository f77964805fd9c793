"""The stages, one module each, declared once at import over the steps of :mod:`aclm.steps` (their table:
docs/reproducing.md), with the run folder's layout and the one reader of each stage's files (outputs).  A
stage's code identity is its module and what that imports."""
