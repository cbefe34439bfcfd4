"""LowerContext's caches: one tensor per distinct constant, however the
constants were made."""

import numpy as np

from executorch_espnn.lowering.context import LowerContext
from executorch_espnn.lowering.graph import Subgraph
from executorch_espnn.lowering.values import Value


def test_constants_made_and_dropped_one_after_another_get_their_own_tensors():
    """An op lowering may pass a temporary array (a folded or negated
    constant) and drop it; the next temporary often lands at the same address.
    Each must still get its own constant tensor with its own bytes."""
    ctx = LowerContext(Subgraph([], [], [], None))
    indices = []
    for k in range(20):
        indices.append(ctx.tensor(Value(None, (4,), const=np.full(4, k, np.int8))))
    assert len(set(indices)) == 20
    # The same array asked for twice is one tensor.
    shared = Value(None, (4,), const=np.arange(4, dtype=np.int8))
    assert ctx.tensor(shared) == ctx.tensor(shared)
