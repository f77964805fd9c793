"""MELM (Zhou et al., ACL 2022): augmentation by masked entity language modeling (SPEC §3).

Entry point: :func:`melm.augment.augment`, named in the method table.
"""
