"""MELM (Zhou et al., ACL 2022): augmentation by masked entity language modeling.

Entry point: :func:`melm.augment.augment`, the baseline contract of
:mod:`aclm.run.chain`.  Modules: :mod:`melm.encoding` (linearized input),
:mod:`melm.training` (entity-masked fine-tuning), :mod:`melm.generation`
(re-masking and top-k filling), :mod:`melm.codemix` (multilingual code-mixing).
"""
