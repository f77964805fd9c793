#!/usr/bin/env python
"""Cut low-resource gold samples from a dataset's train set by iterative stratified sampling.

    python scripts/make_splits.py dataset=multiconer/en splits.seed=1 --out splits/multiconer_en
    python scripts/make_splits.py dataset=conll2003/en "splits.sizes=[200,500]" splits.dev_size=200

Writes train_<N>.conll for each size in splits.sizes and the dev set: dev.conll
(full, or downsampled to splits.dev_size when that is a number) or, with
splits.dev_size=gold, dev_<N>.conll downsampled to each sample's size. Prints each entity type's share of
the mentions in every sample beside its share in the full train set.
"""

from __future__ import annotations

from pathlib import Path

from aclm.base import splits
from aclm.base.dicts import config_hash, to_dict
from aclm.base.data import write_conll
from aclm.base.datasets import load_split
from aclm.base.io import write_json
from aclm.stages import layout
from aclm.run.cli import main_guard, parse, stage_parser


def main() -> None:
    parser = stage_parser(__doc__, [layout.DATA])
    parser.add_argument("--out", type=Path, help="output folder (default: splits/<dataset>/seed<splits.seed>)")
    args, cfg = parse(parser)
    args.out = args.out or Path("splits") / cfg.dataset / f"seed{cfg.splits.seed}"
    full = load_split(cfg.dataset, "train", cfg.data_dir)
    samples = {str(n): splits.sample(full, int(n), cfg.splits.seed) for n in cfg.splits.sizes}
    for n, sentences in samples.items():
        write_conll(args.out / f"train_{n}.conll", sentences)
    dev = load_split(cfg.dataset, "dev", cfg.data_dir)
    dev_sizes = {}
    if dev is not None:
        wanted = ({f"dev_{n}": len(s) for n, s in samples.items()} if cfg.splits.dev_size == "gold"
                  else {"dev": cfg.splits.dev_size or len(dev)})
        for name, size in wanted.items():
            part = splits.sample(dev, size, cfg.splits.seed) if size < len(dev) else dev
            write_conll(args.out / f"{name}.conll", part)
            dev_sizes[name] = len(part)
    table = splits.share_table(full, samples)
    write_json(args.out / "summary.json", {
        "dataset": cfg.dataset, "seed": cfg.splits.seed, "full": len(full),
        "sizes": {n: len(s) for n, s in samples.items()}, "dev": dev_sizes,
        "type_share_full": splits.type_shares(full),
        "type_share": {n: splits.type_shares(s) for n, s in samples.items()},
        "config": to_dict(cfg), "config_hash": config_hash(cfg)})
    print(f"{cfg.dataset}, seed {cfg.splits.seed}: entity-type share of mentions (%), difference to the full set\n{table}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main_guard(main)
