"""The code identity of a model built here (tools/: the tiny models, the mini generators), listed by hand.

Each module named, or function given, is digested by its syntax tree without docstrings, as it always was:
the builds' fingerprints hold these digests (and the import of this module), so changing how they are
computed, or where this function lives, would rebuild every user's mini generators (about an hour on two
cores) for the same weights.  A stage's code identity is :mod:`aclm.engine.code`'s.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Callable

from aclm.engine.code import module_source, tree_digest


def source_digests(*code: str | Callable) -> dict[str, str]:
    """The digest of each module (by name) or function, keyed ``module`` or ``module:qualname``."""
    digests = {}
    for item in code:
        if isinstance(item, str):
            digests[item] = tree_digest(module_source(item), reports=True)
        else:
            fn = inspect.unwrap(item)
            digests[f"{fn.__module__}:{fn.__qualname__}"] = tree_digest(textwrap.dedent(inspect.getsource(fn)),
                                                                        reports=True)
    return dict(sorted(digests.items()))
