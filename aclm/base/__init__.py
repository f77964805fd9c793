"""Infrastructure every other package stands on: paths, config, data and datasets, I/O, runtime, metrics.

Nothing here imports another package of ``aclm``."""
