"""The method's steps, as functions on sentences and models (no files, no stages): keywords (S2),
templates (S3), generator (S4, its fine-tuning), generation and its constraints (S5, mixner), postprocess
(S6), the tagger that S1 and S7 train, labels (the label-token language ACLM, MulDA and MELM share), the
screening vocabulary every generator shares, and diversity.  The baselines reuse them; the stages that
run them on a run's files are :mod:`aclm.stages`."""
