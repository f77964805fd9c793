#!/usr/bin/env python
"""Write a dataset's files into the data folder from the Hugging Face hub, where its entry names a hub dataset.

    python scripts/fetch_data.py dataset=conll2003/en
    python scripts/fetch_data.py dataset=wikineural/en data_dir=/path/to/data
    python scripts/fetch_data.py dataset=conll/multi      # each member of a union

The files go where configs/datasets.yaml says (`train`, `dev`, `test` under data_dir, default
$ACLM_DATA_DIR), as `token<TAB>tag` lines; files already there are kept (--force writes them again).
Runs never download: they read these files, which the stages hash by content, so a dataset updated on
the hub cannot stand behind a cached result. This is the one script that needs a network.
"""

from aclm.base.datasets import fetch_from_hub, resolve_data_dir
from aclm.stages import layout
from aclm.run.cli import main_guard, parse, stage_parser


def main() -> None:
    args, cfg = parse(stage_parser(__doc__, [layout.DATA]))
    written = fetch_from_hub(cfg.dataset, cfg.data_dir, force=args.force)
    for split, n in written.items():
        label = split if " " in split else f"{cfg.dataset} {split}"      # a union's are "<member> <split>"
        print(f"{label}: " + ("already in the data folder" if n is None else f"{n} sentences written"))
    print(f"data folder: {resolve_data_dir(cfg.data_dir)}")


if __name__ == "__main__":
    main_guard(main)
