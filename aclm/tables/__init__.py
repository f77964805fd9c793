"""The tables: paper tables from their grids' runs (report), tables of any runs (tabulate) and Table 3's
perplexity (perplexity).  Nothing here imports the training libraries (flair, transformers) at import time."""
