"""The tables, each module named as the script that drives it: paper tables from their grids' runs (aggregate),
tables of any runs (tabulate_runs), a table's artifacts (export_table), all reading runs as :mod:`runs` records;
Table 3's perplexity (perplexity).  Nothing here imports the training libraries (flair, transformers) at import
time."""
