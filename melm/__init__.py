"""MELM (Zhou et al., ACL 2022): augmentation by masked entity language modeling.

Entry point: :func:`melm.augment.augment`, a method's ``augment(cfg, gold) -> (rows, counts)``
(:mod:`aclm.base.augmentation`), named in the method table.  Modules: :mod:`melm.encoding` (linearized
input), :mod:`melm.training` (entity-masked fine-tuning), :mod:`melm.generation` (re-masking and top-k
filling), :mod:`melm.codemix` (multilingual code-mixing) and :mod:`melm.sources` (the sentences it
borrows from).
"""
