"""The tables: paper tables from their grids' runs (aggregate), tables of any runs (tabulate_runs), a table's
artifacts (export_table), all reading runs as :mod:`runs` records; Table 3's perplexity.  Nothing here imports
a training library at import time."""
