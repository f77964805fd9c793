"""Which encoder layers' attention S2 reads (``keywords.layers``).

Parsed at config load, so a malformed spec fails before S1 trains."""

from __future__ import annotations

#: The ``keywords.selection`` modes that read S1's attention.
NEEDS_ATTENTION = ("attention", "random")
#: ``keywords.layers``'s names, as (first, last) layer; a negative one counts from the end.
NAMED_LAYERS = {"last1": (-1, -1), "last4": (-4, -1), "all": (0, -1)}


def layer_span(spec: str) -> tuple[int, int]:
    """``keywords.layers`` as (first, last), negative counted from the end."""
    if spec in NAMED_LAYERS:
        return NAMED_LAYERS[spec]
    try:
        first, last = (int(part) for part in str(spec).split("-"))
    except ValueError:
        raise ValueError(f"keywords.layers={spec!r}: use last1, last4, all or a range like 8-11") from None
    if first > last:
        raise ValueError(f"keywords.layers={spec!r}: a range runs from the lower layer to the higher, like 8-11")
    return first, last


def layer_indices(spec: str, num_layers: int) -> list[int]:
    """The layer indices ``keywords.layers`` names in a model of ``num_layers``."""
    first, last = (i + num_layers if i < 0 else i for i in layer_span(spec))
    if not 0 <= first <= last < num_layers:
        raise ValueError(f"keywords.layers={spec!r} does not fit a model with {num_layers} layers")
    return list(range(first, last + 1))
