"""The arena rule: which tensors are live when, and which may share bytes.

This is the one statement on the Python side of what the native parser's
arena-plan check accepts (components/espnn_runtime/src/parser.cpp,
CheckArenaPlan). The planner (memory.arena_plan) places tensors by it and
the analysis (analysis.liveness) derives the lower bound from it, so the
bound is, by construction, for plans the parser accepts.
tests/memory/test_arena_rule.py holds it equal to the parser: on every
payload of the op corpus and the zoo, every alias the rule makes is accepted
and every alias it refuses is rejected.

Liveness (parser: a backward pass over the ops):
* a graph input is written before op 0 (step -1); an op's outputs at its step;
* a tensor is live from the step that writes it to the last step that reads
  it; a graph output is live to the end (step len(ops)); a tensor nobody
  reads is live only at the step that writes it.

Aliases (xts3_format.h, ESPNN_XTS3_ALIASING), the only ways two live
tensors may share bytes, and then only exactly (same offset and size):
* VIEW (RESHAPE): the output over its first input;
* IN_PLACE (elementwise ops): the output over one of its inputs when no
  tensor already on those bytes is live after the op. "Already on those
  bytes" is the whole alias class: a RESHAPE view of the input that is read
  later keeps the bytes in use even when the input itself dies here.

Fused regions (a BAND_LOOP op and the ``region_ops`` ops after it) run
their ops interleaved, band by band: every arena tensor a region op reads or
writes is live over the whole region (BAND_LOOP step to its last op), and no
alias is formed inside it, except that an ``in_place`` region's output joins
the class of its input (the first region op's input 0; the output may be the
smaller, from the input's first byte) when nothing on those bytes is live
after the region. Such a class occupies, at each step, the bytes of its
largest member live then (Liveness.segments).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .. import _native


@dataclass(frozen=True)
class OpIO:
    """What the rule needs of an op: its name and tensor indices (None for an
    absent optional input)."""

    name: str
    inputs: tuple[int | None, ...]
    outputs: tuple[int, ...]
    region_ops: int = 0  # BAND_LOOP: the number of ops after it in its region
    in_place: bool = False  # BAND_LOOP: the IN_PLACE flag


@dataclass(frozen=True)
class ArenaGraph:
    """An XTS3 graph as the arena rule sees it (tensor sizes and where they
    live, ops in execution order, graph inputs and outputs). ``pinned``:
    tensors whose offset the caller fixed; the rule makes no alias with them."""

    nbytes: tuple[int, ...]
    in_arena: tuple[bool, ...]
    ops: tuple[OpIO, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    pinned: frozenset[int] = field(default_factory=frozenset)
    # Row geometry for fused regions (memory.fused_regions.BandGraph), when known.
    bands: object | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_summary(cls, summary: dict) -> "ArenaGraph":
        """From the native parser's summary of a blob (``_native.parse``)."""
        tensors = summary["tensors"]
        return cls(
            nbytes=tuple(t["nbytes"] for t in tensors),
            # An EXTERNAL graph input is the caller's bytes: no arena space.
            in_arena=tuple(t["memory"] == "ARENA" and not t["flags"] & _native.TENSOR_FLAGS["EXTERNAL"]
                           for t in tensors),
            ops=tuple(_op_io(op) for op in summary["ops"]),
            inputs=tuple(summary["inputs"]),
            outputs=tuple(summary["outputs"]),
        )

    @classmethod
    def from_blob(cls, blob: bytes) -> "ArenaGraph":
        """From a blob, with the row geometry fused regions need."""
        # lazy: fused_regions imports this module (a cycle)
        from .fused_regions import BandGraph

        bands = BandGraph(blob)
        g = cls.from_summary(bands.summary)
        return cls(g.nbytes, g.in_arena, g.ops, g.inputs, g.outputs, g.pinned, bands)

    def arena_inputs(self, op: OpIO) -> list[int]:
        return [t for t in op.inputs if t is not None and self.in_arena[t]]


def _op_io(op: dict) -> OpIO:
    if op["op"] == "BAND_LOOP":
        return OpIO(op["op"], tuple(op["inputs"]), tuple(op["outputs"]), op["params"]["num_ops"],
                    bool(op["params"]["flags"] & _native.BAND_FLAGS["IN_PLACE"]))
    return OpIO(op["op"], tuple(op["inputs"]), tuple(op["outputs"]))


def regions_of(g: "ArenaGraph") -> list[tuple[int, int]]:
    """(BAND_LOOP step, last op step) of every fused region of ``g``."""
    return [(i, i + op.region_ops) for i, op in enumerate(g.ops) if op.name == "BAND_LOOP"]


def aligned(nbytes: int) -> int:
    """Bytes a tensor occupies in the arena: offsets are ARENA_ALIGNMENT-aligned."""
    a = _native.ARENA_ALIGNMENT
    return (nbytes + a - 1) // a * a


def aliasing(opname: str) -> str:
    """NONE, VIEW or IN_PLACE (xts3_format.h's ESPNN_XTS3_ALIASING, via the binding)."""
    return _native.OPCODES[opname]["aliasing"]


@dataclass(frozen=True)
class Liveness:
    """Lifetimes and alias classes of a graph's arena tensors.

    ``first[t]``/``last[t]``: the steps t is live from/to, inclusive (only
    tensors that are ever live appear). ``root[t]``: the representative of
    t's alias class (tensors that occupy the same bytes).
    """

    graph: ArenaGraph
    first: dict[int, int]
    last: dict[int, int]
    root: dict[int, int]

    @cached_property
    def classes(self) -> dict[int, tuple[int, int, int]]:
        """root -> (first step, last step, aligned bytes) of each class:
        the block a planner places (computed once; the bound asks per step)."""
        out: dict[int, tuple[int, int, int]] = {}
        for t, r in self.root.items():
            lo, hi, size = self.first[t], self.last[t], aligned(self.graph.nbytes[t])
            if r in out:
                plo, phi, psize = out[r]
                lo, hi, size = min(lo, plo), max(hi, phi), max(size, psize)
            out[r] = (lo, hi, size)
        return out

    @cached_property
    def segments(self) -> dict[int, tuple[tuple[int, int, int], ...]]:
        """root -> the class's bytes over time, as (first step, last step,
        aligned bytes) runs in step order: at each step the largest member
        live then (all start on the class's first byte). One run, the
        class's block, except where an in-place region's output is narrower
        than its input: the class shrinks to it once the input is dead."""
        members: dict[int, list[int]] = {}
        for t, r in self.root.items():
            members.setdefault(r, []).append(t)
        out = {}
        for r, ts in members.items():
            lo, hi, size = self.classes[r]
            if len(ts) == 1 or all(aligned(self.graph.nbytes[t]) == size for t in ts):
                out[r] = ((lo, hi, size),)
                continue
            runs: list[list[int]] = []
            for step in range(lo, hi + 1):
                b = max((aligned(self.graph.nbytes[t]) for t in ts if self.first[t] <= step <= self.last[t]),
                        default=0)
                if runs and runs[-1][2] == b and runs[-1][1] == step - 1:
                    runs[-1][1] = step
                else:
                    runs.append([step, step, b])
            out[r] = tuple((a, e, b) for a, e, b in runs if b)
        return out

    def size_at(self, root: int, step: int) -> int:
        """Aligned bytes of class ``root`` at ``step`` (its block's size
        when it is not live then)."""
        for lo, hi, size in self.segments[root]:
            if lo <= step <= hi:
                return size
        return self.classes[root][2]

    def live_at(self, step: int) -> set[int]:
        """Tensors live while op ``step`` runs (-1: the graph inputs, written
        together before op 0)."""
        return {t for t in self.first if self.first[t] <= step <= self.last[t]}

    def class_bytes(self, tensors, step: int | None = None) -> int:
        """Aligned bytes of the alias classes of ``tensors``, each counted
        once: at ``step`` (segments), or each class's largest."""
        roots = {self.root[t] for t in tensors}
        if step is None:
            return sum(self.classes[r][2] for r in roots)
        return sum(self.size_at(r, step) for r in roots)

    def lower_bound(self) -> int:
        """The most bytes of alias classes live at one step: no plan the
        parser accepts for this op order is smaller. Not always reached
        (memory.arena_plan says when the planner does)."""
        return max(self.class_bytes(self.live_at(s), s) for s in range(-1, len(self.graph.ops)))


def lifetimes(g: ArenaGraph) -> tuple[dict[int, int], dict[int, int]]:
    """first and last live step of every arena tensor that is ever live."""
    end = len(g.ops)
    arena_inputs = [t for t in g.inputs if g.in_arena[t]]  # EXTERNAL inputs take no arena bytes
    first = {t: -1 for t in arena_inputs}
    last = {t: -1 for t in arena_inputs}
    for step, op in enumerate(g.ops):
        for t in g.arena_inputs(op):
            last[t] = max(last.get(t, step), step)
        for t in op.outputs:
            if not g.in_arena[t]:
                continue  # an EXTERNAL graph output: the caller's buffer
            first.setdefault(t, step)
            last[t] = max(last.get(t, step), step)
    for t in g.outputs:
        if not g.in_arena[t]:
            continue
        last[t] = end
        first.setdefault(t, -1)  # an output nobody writes is the caller's (a graph input)
    for b, e in regions_of(g):  # a region's tensors are live over all of it
        for op in g.ops[b:e + 1]:
            for t in g.arena_inputs(op) + list(op.outputs):
                first[t] = min(first[t], b)
                last[t] = max(last[t], e)
    return first, last


def may_alias(g: ArenaGraph, step: int, out: int, t: int | None, class_last: int) -> bool:
    """May op ``step``'s output ``out`` occupy exactly the bytes of its input
    ``t``, whose alias class is live until ``class_last``?"""
    op = g.ops[step]
    mode = aliasing(op.name)
    if mode == "NONE" or t is None or not g.in_arena[t] or g.nbytes[t] != g.nbytes[out]:
        return False
    if mode == "VIEW":
        return t == op.inputs[0]
    return class_last <= step  # IN_PLACE: nothing on those bytes is read after the op


def liveness(g: ArenaGraph) -> Liveness:
    """Lifetimes and the alias classes the rule forms, in op order: each
    VIEW/IN_PLACE output joins the class of the first input it may alias."""
    first, last = lifetimes(g)
    parent = {t: t for t in first}
    class_last = dict(last)

    def find(t: int) -> int:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    inside = {s for b, e in regions_of(g) for s in range(b + 1, e + 1)}
    for step, op in enumerate(g.ops):
        if op.name == "BAND_LOOP" and op.in_place:
            e = step + op.region_ops
            x, y = g.ops[step + 1].inputs[0], g.ops[e].outputs[0]
            if x is not None and x in parent and y in parent and not {x, y} & g.pinned:
                r = find(x)
                # y from x's first byte, no longer (parser.cpp InPlaceOver);
                # the class shrinks to y once x is dead (Liveness.segments).
                if g.nbytes[y] <= g.nbytes[x] and class_last[r] <= e:
                    parent[find(y)] = r
                    class_last[r] = max(class_last[r], class_last[y])
            continue
        if step in inside or aliasing(op.name) == "NONE":
            continue
        out = op.outputs[0]
        if out in g.pinned:
            continue
        for t in op.inputs:
            if t is None or t in g.pinned or t not in parent:
                continue
            r = find(t)
            if may_alias(g, step, out, t, class_last[r]):
                parent[find(out)] = r
                class_last[r] = max(class_last[r], class_last[out])
                break
    return Liveness(g, first, last, {t: find(t) for t in first})
