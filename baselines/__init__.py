"""Data-augmentation baselines the ACLM paper compares against (SPEC section 3)."""
