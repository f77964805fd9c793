#!/usr/bin/env python
"""How the CPU trainings share a machine: seconds per training step of the mini generator's build (the mBART
of tools/pretraining.py, its batch of 32) and of the mini profile's tagger encoder (MiniLM, its ner.batch_size), with
OpenMP's threads spinning while they wait (libgomp's default) or asleep (``OMP_WAIT_POLICY=PASSIVE``, the
project's default, set in aclm/__init__.py), on idle cores and beside one or two busy programs.

    python tools/thread_sharing.py [--steps 14] [--rounds 2] [--out results/thread_sharing.json]

Each measurement is a fresh process (the policy is read when torch loads), the two policies alternate within
a round, and each prints a digest of the weights after its steps: the policy changes the waiting, never the
arithmetic, so the digests of one model and thread count agree.  Ratios are within this one call.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

POLICIES = {"spin": None, "passive": "PASSIVE"}
BUSY = "while True: pass"


def one_model(model: str, steps: int) -> dict:
    """Train ``model`` (``mbart`` or ``tagger``) for ``steps`` steps of random tokens; seconds per step after the
    first two, and the weights' digest."""
    import hashlib

    import torch
    from transformers import AutoModel, MBartConfig, MBartForConditionalGeneration

    torch.manual_seed(0)
    if model == "mbart":
        from tools.pretraining import SPEC

        net = MBartForConditionalGeneration(MBartConfig(vocab_size=SPEC["vocab_size"], pad_token_id=1,
                                                        decoder_start_token_id=2, **SPEC["config"]))
        shape, vocab = (SPEC["train"]["batch_size"], 40), SPEC["vocab_size"]
        loss_of = lambda ids: net(input_ids=ids, labels=ids.flip(1)).loss          # noqa: E731
    else:
        from aclm.base.config import load_config
        from aclm.base.models import model_path

        ner = load_config(["profile=mini"]).ner
        net = AutoModel.from_pretrained(model_path(ner.model))
        shape, vocab = (ner.batch_size, 40), net.config.vocab_size
        loss_of = lambda ids: net(input_ids=ids).last_hidden_state.pow(2).mean()   # noqa: E731
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    draws, times = torch.Generator().manual_seed(1), []
    for _ in range(steps):
        ids = torch.randint(3, vocab, shape, generator=draws)
        start = time.perf_counter()
        loss_of(ids).backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - start)
    later = times[2:]
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()
    return {"s_per_step": sum(later) / len(later), "digest": digest[:16], "threads": torch.get_num_threads()}


def measure(model: str, policy: str, steps: int) -> dict:
    """One measurement in a fresh process: torch loads first there, so an unset policy stays libgomp's own."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    if POLICIES[policy]:
        env["OMP_WAIT_POLICY"] = POLICIES[policy]
    out = subprocess.run([sys.executable, __file__, "--one", model, "--steps", str(steps)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--rounds", type=int, default=2, help="repeats of each measurement, interleaved")
    parser.add_argument("--out", type=Path, default=Path("results/thread_sharing.json"))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_model(args.one, args.steps)))
        return
    from aclm.base.io import write_json     # not in a measuring process: aclm would set the policy before torch

    rows, busy = [], []
    try:
        for others in (0, 1, 2):
            while len(busy) < others:
                busy.append(subprocess.Popen([sys.executable, "-c", BUSY]))
            for model in ("mbart", "tagger"):
                for round_ in range(args.rounds):
                    for policy in POLICIES:
                        row = {"model": model, "policy": policy, "busy_programs": others, "round": round_,
                               **measure(model, policy, args.steps)}
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    finally:
        for process in busy:
            process.kill()
    summary = {}
    for model in ("mbart", "tagger"):
        def mean(policy: str, others: int) -> float:
            mine = [r["s_per_step"] for r in rows
                    if (r["model"], r["policy"], r["busy_programs"]) == (model, policy, others)]
            return sum(mine) / len(mine)

        for policy in POLICIES:
            for others in (0, 1, 2):
                seconds = mean(policy, others)
                summary[f"{model} {policy} busy={others}"] = {"s_per_step": round(seconds, 3),
                                                              "x_idle": round(seconds / mean("spin", 0), 2)}
    for name, row in summary.items():
        print(f"{name:28s} {row['s_per_step']:6.3f} s/step  {row['x_idle']:4.2f}x spinning on idle cores")
    write_json(args.out, {"cores": os.cpu_count(), "steps": args.steps, "rows": rows, "summary": summary})


if __name__ == "__main__":
    main()
