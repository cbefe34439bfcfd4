"""Execution order: a topological order of an XTS3 graph's ops with a smaller arena.

The order the lowering emits ops in is a valid schedule, but on graphs with
parallel branches it can keep several branches' large tensors live at once.
Two memory-aware list schedules are tried besides it: "least net allocation
first" (run the ready op that adds the fewest bytes minus the bytes it lets
die) and "finish the branch" (run the ready op that reads the most recently
written tensor). Each candidate is judged by the arena plan_arena really
produces for it; the given order wins ties, so graphs that gain nothing keep
their op order. Results are unchanged by construction: every op still runs
after the ops that write its inputs, and no op has side effects beyond its
outputs.
"""

from __future__ import annotations

from dataclasses import replace

from .arena_plan import plan_arena
from .arena_rule import ArenaGraph, aligned


def memory_order(g: ArenaGraph) -> list[int]:
    """The op order (new position -> old op index) with the smallest planned
    arena. Graphs with pinned tensor offsets keep their order (a hand-made
    plan is only valid for the order it was made for)."""
    n = len(g.ops)
    identity = list(range(n))
    if n < 3 or g.pinned:
        return identity
    best, best_arena = identity, plan_arena(g).arena_size
    for candidate in (_list_schedule(g, by_net_bytes=True), _list_schedule(g, by_net_bytes=False)):
        if candidate == best:
            continue
        arena = plan_arena(reordered(g, candidate)).arena_size
        if arena < best_arena:
            best, best_arena = candidate, arena
    return best


def reordered(g: ArenaGraph, order: list[int]) -> ArenaGraph:
    # The row geometry (g.bands) is per op of the old order: dropped.
    return replace(g, ops=tuple(g.ops[i] for i in order), bands=None)


def _list_schedule(g: ArenaGraph, *, by_net_bytes: bool) -> list[int]:
    """A topological order of the ops, chosen greedily (see memory_order)."""
    ops = g.ops
    producer = {t: i for i, op in enumerate(ops) for t in op.outputs}
    arena_inputs = [sorted(set(g.arena_inputs(op))) for op in ops]
    readers: dict[int, int] = {}
    for ins in arena_inputs:
        for t in ins:
            readers[t] = readers.get(t, 0) + 1
    outputs = set(g.outputs)
    waiting = [sum(1 for t in ins if t in producer) for ins in arena_inputs]
    dependents: dict[int, list[int]] = {}
    for i, ins in enumerate(arena_inputs):
        for t in ins:
            if t in producer:
                dependents.setdefault(producer[t], []).append(i)
    ready = {i for i in range(len(ops)) if waiting[i] == 0}
    written_at: dict[int, int] = {}  # tensor -> step it was written (recency)

    def net_bytes(i: int) -> int:
        added = sum(aligned(g.nbytes[t]) for t in ops[i].outputs if g.in_arena[t])
        freed = sum(aligned(g.nbytes[t]) for t in arena_inputs[i] if readers[t] == 1 and t not in outputs)
        return added - freed

    def staleness(i: int) -> int:  # lower = reads a more recently written tensor
        return -max((written_at.get(t, -1) for t in arena_inputs[i]), default=-1)

    cost = net_bytes if by_net_bytes else staleness
    order: list[int] = []
    while ready:
        pick = min(ready, key=lambda i: (cost(i), i))
        ready.remove(pick)
        order.append(pick)
        for t in arena_inputs[pick]:
            readers[t] -= 1
        for t in ops[pick].outputs:
            written_at[t] = len(order)
        for j in dependents.get(pick, ()):
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.add(j)
    if len(order) != len(ops):  # a cycle: leave the order to the parser's def-before-use check
        return list(range(len(ops)))
    return order
