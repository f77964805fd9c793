"""The tables: experiment grids (grid), paper tables from their runs (report), tables of any runs
(tabulate), Table 3's perplexity (perplexity) and Slurm submission (slurm).  Nothing here imports the
training libraries (flair, transformers) at import time."""
