"""The stage cache: declared stages whose folders are built once and skipped while current.

A stage is current while its stamp holds the identity it would have now (config view, inputs, models and
code, each by content: :mod:`aclm.engine.identity`, :mod:`aclm.engine.code`) and its folder holds the files
it wrote.  Writers take folder locks (:mod:`aclm.engine.locks`) and, on a shared GPU, lease its memory
(:mod:`aclm.engine.memory`).  Nothing here knows the method: where a stage writes comes in a :class:`Place`.
"""

from aclm.engine.identity import ENVIRONMENT, STAMP
from aclm.engine.locks import folder_lock
from aclm.engine.stages import Place, Pruned, Stale, planning, prune, stage, stamp

__all__ = ["ENVIRONMENT", "STAMP", "Place", "Pruned", "Stale", "folder_lock", "planning", "prune", "stage", "stamp"]
