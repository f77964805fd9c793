"""ACLM and its baselines for low-resource complex NER.

OpenMP's threads wait for work asleep (``OMP_WAIT_POLICY=PASSIVE``) unless the environment says otherwise:
libgomp's default spins first, and a spinning thread whose core another program shares holds back every step
of a CPU training.  Set here, before anything of the project imports torch; the waiting changes, the arithmetic
does not (results/history/2026-11-28-thread-sharing.md measured both).
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
