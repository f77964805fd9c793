"""The method's steps, as functions on sentences and models (no files, no stages): keywords (S2),
templates (S3), finetuning (S4), generation and its constraints (S5, mixner), postprocess (S6), the
screening vocabulary every generator shares, and diversity.  The baselines reuse them; the stages that
run them on a run's files are :mod:`aclm.run.pipeline`."""
