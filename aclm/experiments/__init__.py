"""Running experiments: a paper table's grid of runs (grid), as make targets or Slurm job arrays (slurm).
Nothing here imports the training libraries at import time: a run trains in its own process."""
