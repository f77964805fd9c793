"""The method's steps (S1-S7) as functions on sentences and models: no files, no stages.

The baselines reuse them; :mod:`aclm.stages` runs them on a run's files."""
