#!/usr/bin/env python
"""Check a setting's data before training it: every file it reads, its tags, types and sentence lengths.

    python scripts/check_data.py dataset=multiconer/en gold=100
    python scripts/check_data.py dataset=path/to/my_folder profile=tiny

Errors (exit 1) name the file and line: a missing or malformed file, a lower-case tag, two types that
differ only in case, a type the dataset does not declare or one found in fewer than
data_check.min_type_sentences sentences, a type of a test set that the training data lacks; and a gold
size the train set cannot give, an unbuilt model folder with the make target that builds it, a hub model
not in the Hugging Face cache while the hub is unreachable (one probe of a few seconds).  Warnings: I- tags
opening entities (IOB1), sentences longer than the encoder's limit, a dev set taken from the train set,
a generator length limit that cuts more than 1% of S4's targets or S5's outputs (each share is printed).
Every run makes the same check first (aclm/run/datacheck.py).
"""

from aclm.stages import layout
from aclm.run.cli import main_guard, parse, stage_parser
from aclm.run.datacheck import check_setting


def main() -> None:
    _, cfg = parse(stage_parser(__doc__, [layout.DATA]))
    report = check_setting(cfg)
    for path, n in report.files.items():
        print(f"read {path}: {n} sentences")
    for line in report.lengths:
        print(line)
    for message in report.warnings:
        print(f"warning: {message}")
    report.raise_errors()
    print(f"data check passed: {len(report.files)} file(s), {sum(report.files.values())} sentences, "
          f"{len(report.warnings)} warning(s)")


if __name__ == "__main__":
    main_guard(main)
