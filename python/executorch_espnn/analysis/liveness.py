"""Arena liveness of a parsed XTS3 blob: the lower bound and the per-step
timeline, both by the arena rule the parser enforces (memory.arena_rule:
lifetimes, and the alias classes -- views and in-place outputs -- that may
share bytes).

The bound counts each alias class once at every step, so no plan the
parser accepts for this execution order is smaller: max over steps (and
over the graph inputs, written together before op 0) of the
16-byte-aligned sizes of the classes live then. A plan that small need not
exist; the planner reaches it on every graph the tests pin
(memory.arena_plan).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..memory import ArenaGraph, liveness
from ..memory.arena_rule import aligned
from .summary import parse


@dataclass(frozen=True)
class ArenaStep:
    """One op step of the arena timeline."""

    index: int  # op index (execution order)
    op: str
    live_bytes: int  # aligned bytes of the alias classes live at this step
    plan_bytes: int  # highest arena byte the stored plan uses at this step
    live_tensors: tuple[int, ...]


def arena_lower_bound(blob_or_summary) -> int:
    """Bytes no accepted plan for the blob's op order is below (the most live at one step)."""
    return liveness(ArenaGraph.from_summary(parse(blob_or_summary))).lower_bound()


def arena_timeline(blob_or_summary) -> list[ArenaStep]:
    """Bytes live at each op step (the lower bound's count) and the bytes the
    stored plan spans then (the end of the highest live tensor)."""
    s = parse(blob_or_summary)
    lv = liveness(ArenaGraph.from_summary(s))
    tensors = s["tensors"]
    out = []
    for i, op in enumerate(s["ops"]):
        live = lv.live_at(i)
        plan = max((tensors[t]["offset"] + aligned(tensors[t]["nbytes"]) for t in live), default=0)
        out.append(ArenaStep(i, op["op"], lv.class_bytes(live, i), plan, tuple(sorted(live))))
    return out
