"""Low-level XTS3 writer: a graph of tensors and ops -> bytes.

Every constant of the format (magic, version, record layouts, opcodes,
parameter names, limits) comes from the native runtime's header through
``executorch_espnn._native``; nothing about the layout is restated here.
docs/xts3-format.md describes the bytes.

The writer checks what the caller passes (op names, parameter names, tensor
indices) so mistakes surface as a ValueError at the call that made them; the
native parser remains the judge of whether the blob is valid.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .. import _native as fmt

_NUMPY_TO_DTYPE = {np.dtype(np.int8): "INT8", np.dtype(np.int32): "INT32", np.dtype(np.float32): "FLOAT32"}


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass
class _Tensor:
    shape: tuple[int, ...]
    dtype: str
    memory: str  # "ARENA" or "CONSTANT"
    scale: float = 0.0
    zero_point: int = 0
    data: bytes | None = None  # constants only
    offset: int | None = None  # arena offset override (tests, planners)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * fmt.DTYPES[self.dtype][1]


@dataclass
class _Op:
    name: str
    inputs: list[int]
    outputs: list[int]
    params: list[int]
    debug_handle: int = 0


@dataclass
class Xts3Writer:
    """Builds an XTS3 blob. Tensor and op indices are returned as ints."""

    _tensors: list[_Tensor] = field(default_factory=list)
    _ops: list[_Op] = field(default_factory=list)
    _inputs: list[int] = field(default_factory=list)
    _outputs: list[int] = field(default_factory=list)

    # -- tensors ---------------------------------------------------------------
    def tensor(self, shape: Sequence[int], dtype: str = "INT8", *, scale: float = 0.0,
               zero_point: int = 0, offset: int | None = None) -> int:
        """An activation tensor (lives in the arena)."""
        if dtype not in fmt.DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; XTS3 has {sorted(fmt.DTYPES)}")
        self._tensors.append(_Tensor(tuple(int(d) for d in shape), dtype, "ARENA", float(scale),
                                     int(zero_point), offset=offset))
        return len(self._tensors) - 1

    def constant(self, array: np.ndarray, *, scale: float = 0.0, zero_point: int = 0) -> int:
        """A constant tensor; its dtype is the array's (int8, int32 or float32)."""
        array = np.asarray(array)
        dtype = _NUMPY_TO_DTYPE.get(array.dtype)
        if dtype is None:
            raise ValueError(f"constants must be int8, int32 or float32, not {array.dtype}")
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        shape = array.shape if array.ndim else (1,)
        self._tensors.append(_Tensor(tuple(shape), dtype, "CONSTANT", float(scale), int(zero_point), data))
        return len(self._tensors) - 1

    # -- ops ---------------------------------------------------------------------
    def op(self, name: str, inputs: Iterable[int | None], outputs: Iterable[int], *,
           debug_handle: int = 0, **params: int | float) -> int:
        """Appends an op; ``params`` must name exactly the opcode's fields."""
        spec = fmt.OPCODES.get(name)
        if spec is None:
            raise ValueError(f"unknown op {name!r}; XTS3 has {sorted(fmt.OPCODES)}")
        names = spec["params"]
        missing = [n for n in names if n not in params]
        extra = [n for n in params if n not in names]
        if missing or extra:
            raise ValueError(f"{name}: missing params {missing}, unknown params {extra}; fields are {list(names)}")
        words = []
        for n in names:
            v = params[n]
            if n.endswith("_f32"):
                words.append(struct.unpack("<i", struct.pack("<f", float(v)))[0])
            else:
                if int(v) != v or not -(2**31) <= int(v) < 2**31:
                    raise ValueError(f"{name}.{n} = {v!r} is not an int32")
                words.append(int(v))
        ins = [fmt.NO_TENSOR if t is None else self._check_index(t) for t in inputs]
        outs = [self._check_index(t) for t in outputs]
        self._ops.append(_Op(name, ins, outs, words, int(debug_handle)))
        return len(self._ops) - 1

    def set_inputs(self, tensors: Iterable[int]) -> None:
        self._inputs = [self._check_index(t) for t in tensors]

    def set_outputs(self, tensors: Iterable[int]) -> None:
        self._outputs = [self._check_index(t) for t in tensors]

    def _check_index(self, t: int) -> int:
        if not 0 <= int(t) < len(self._tensors):
            raise ValueError(f"tensor index {t} does not exist (have {len(self._tensors)})")
        return int(t)

    # -- arena -------------------------------------------------------------------
    def _lifetimes(self) -> tuple[dict[int, int], dict[int, int]]:
        """[first, last] step of every arena tensor, as the parser defines
        them: graph inputs are written before step 0 (-1), an op's outputs at
        its step; last = the last step that reads it, len(ops) for a graph
        output."""
        n_steps = len(self._ops)
        first = {t: -1 for t in self._inputs}
        last: dict[int, int] = {}
        for step, op in enumerate(self._ops):
            for t in op.outputs:
                first.setdefault(t, step)
                last[t] = max(last.get(t, step), step)
            for t in op.inputs:
                if t != fmt.NO_TENSOR and self._tensors[t].memory == "ARENA":
                    last[t] = max(last.get(t, step), step)
        for t in self._outputs:
            last[t] = n_steps
        return first, last

    def _alias_classes(self, last: dict[int, int], fixed: set[int]) -> dict[int, int]:
        """tensor -> representative of the tensors that will share bytes.

        The parser allows an output to coincide exactly with an input of a
        VIEW op (RESHAPE), and with an input of an IN_PLACE op (elementwise)
        when that input -- and every tensor already sharing its bytes -- is
        not read after the op (xts3_format.h, ESPNN_XTS3_ALIASING). Tensors
        with a caller-fixed offset are left alone."""
        root = {i: i for i, t in enumerate(self._tensors) if t.memory == "ARENA"}
        class_last = {i: last.get(i, -1) for i in root}

        def find(t: int) -> int:
            while root[t] != t:
                root[t] = root[root[t]]
                t = root[t]
            return t

        for step, op in enumerate(self._ops):
            mode = fmt.OPCODES[op.name]["aliasing"]
            if mode == "NONE" or op.outputs[0] in fixed:
                continue
            out = op.outputs[0]
            for t in op.inputs:
                if t == fmt.NO_TENSOR or t not in root or t in fixed:
                    continue
                if self._tensors[t].nbytes != self._tensors[out].nbytes:
                    continue
                r = find(t)
                if mode == "IN_PLACE" and class_last[r] > step:
                    continue  # its bytes are still needed after this op
                root[find(out)] = r
                class_last[r] = max(class_last[r], class_last[out])
                break
        return {t: find(t) for t in root}

    def plan_arena(self) -> tuple[dict[int, int], int]:
        """Assigns arena offsets: tensors whose lifetimes overlap never share
        bytes, except the exact aliases the parser allows (views and
        in-place elementwise ops; see _alias_classes), which are planned as
        one block.

        Greedy first-fit, tried in a few orders (largest first, then by
        first use, then by size x lifetime); the smallest arena wins.
        executorch_espnn.analysis.arena_lower_bound gives the bound these
        plans are measured against.
        """
        n_steps = len(self._ops)
        first, last = self._lifetimes()
        align = fmt.ARENA_ALIGNMENT
        arena = [i for i, t in enumerate(self._tensors) if t.memory == "ARENA"]
        fixed = {i for i in arena if self._tensors[i].offset is not None}
        cls = self._alias_classes(last, fixed)
        # One block per class: the union of its members' lifetimes.
        blocks: dict[int, list[int]] = {}  # root -> [first, last, size]
        for i in arena:
            if i in fixed:
                continue
            lo, hi = first.get(i, -1), last.get(i, n_steps)
            size = _align(self._tensors[i].nbytes, align)
            b = blocks.setdefault(cls[i], [lo, hi, size])
            b[0], b[1], b[2] = min(b[0], lo), max(b[1], hi), max(b[2], size)
        pinned = [(self._tensors[i].offset, self._tensors[i].offset + _align(self._tensors[i].nbytes, align),
                   first.get(i, -1), last.get(i, n_steps)) for i in fixed]

        def place(order: list[int]) -> tuple[dict[int, int], int]:
            offsets: dict[int, int] = {}
            placed = list(pinned)  # (offset, end, first, last)
            for r in order:
                lo, hi, size = blocks[r]
                offset = 0
                for o, e, f, l in sorted(p for p in placed if not (p[3] < lo or hi < p[2])):
                    if offset + size <= o:
                        break
                    offset = max(offset, _align(e, align))
                offsets[r] = offset
                placed.append((offset, offset + size, lo, hi))
            return offsets, max((p[1] for p in placed), default=0)

        orders = [
            sorted(blocks, key=lambda r: (-blocks[r][2], blocks[r][0], r)),
            sorted(blocks, key=lambda r: (blocks[r][0], -blocks[r][2], r)),
            sorted(blocks, key=lambda r: (-blocks[r][2] * (blocks[r][1] - blocks[r][0] + 1), r)),
        ]
        block_offsets, _ = min((place(o) for o in orders), key=lambda p: p[1])
        offsets = {i: self._tensors[i].offset if i in fixed else block_offsets[cls[i]] for i in arena}
        arena_size = _align(max((offsets[i] + self._tensors[i].nbytes for i in arena), default=0), align)
        return offsets, arena_size

    # -- execution order -----------------------------------------------------------
    def order_ops_for_memory(self) -> list[int]:
        """Reorders the ops (a topological order of the same graph) when that
        gives a smaller arena; returns the permutation applied, new position
        -> old op index (callers keep per-op side tables in step with it).

        The order the ops were added in is a valid schedule, but on graphs
        with parallel branches it can keep several branches' large tensors
        live at once. Two memory-aware list schedules are tried besides it:
        "least net allocation first" (run the ready op that adds the fewest
        bytes minus the bytes it lets die) and "finish the branch" (run the
        ready op that reads the most recently written tensor). Each
        candidate is judged by the arena plan_arena() really produces for
        it; the given order wins ties, so graphs that gain nothing keep
        their op order. Results are unchanged by construction: every op
        still runs after the ops that write its inputs, and no op has side
        effects beyond its outputs. Caller-fixed tensor offsets (tests that
        pin a plan) disable reordering.
        """
        n = len(self._ops)
        identity = list(range(n))
        if n < 3 or any(t.memory == "ARENA" and t.offset is not None for t in self._tensors):
            return identity
        best, best_arena = identity, self.plan_arena()[1]
        original = self._ops
        try:
            for candidate in (self._schedule(by_net_bytes=True), self._schedule(by_net_bytes=False)):
                if candidate == best:
                    continue
                self._ops = [original[i] for i in candidate]
                arena = self.plan_arena()[1]
                if arena < best_arena:
                    best, best_arena = candidate, arena
        finally:
            self._ops = [original[i] for i in best]
        return best

    def _schedule(self, *, by_net_bytes: bool) -> list[int]:
        """A topological order of the ops, chosen greedily (see order_ops_for_memory)."""
        ops = self._ops
        align = fmt.ARENA_ALIGNMENT
        producer = {t: i for i, op in enumerate(ops) for t in op.outputs}
        arena_inputs = [sorted({t for t in op.inputs if t != fmt.NO_TENSOR and self._tensors[t].memory == "ARENA"})
                        for op in ops]
        readers: dict[int, int] = {}
        for ins in arena_inputs:
            for t in ins:
                readers[t] = readers.get(t, 0) + 1
        outputs = set(self._outputs)
        waiting = [sum(1 for t in ins if t in producer) for ins in arena_inputs]
        dependents: dict[int, list[int]] = {}
        for i, ins in enumerate(arena_inputs):
            for t in ins:
                if t in producer:
                    dependents.setdefault(producer[t], []).append(i)
        ready = {i for i in range(len(ops)) if waiting[i] == 0}
        written_at: dict[int, int] = {}  # tensor -> step it was written (recency)

        def net_bytes(i: int) -> int:
            added = sum(_align(self._tensors[t].nbytes, align) for t in ops[i].outputs)
            freed = sum(_align(self._tensors[t].nbytes, align) for t in arena_inputs[i]
                        if readers[t] == 1 and t not in outputs)
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

    # -- bytes -------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        offsets, arena_size = self.plan_arena()

        constants = bytearray()
        const_offsets: dict[int, int] = {}
        for i, t in enumerate(self._tensors):
            if t.memory == "CONSTANT":
                # 16-byte aligned: satisfies every dtype's natural alignment
                # and the SIMD loads on the ESP32-S3.
                constants += bytes(_align(len(constants), fmt.CONSTANT_ALIGNMENT) - len(constants))
                const_offsets[i] = len(constants)
                constants += t.data

        tf = fmt.TENSOR_FIELDS
        tensors = bytearray()
        for i, t in enumerate(self._tensors):
            rec = bytearray(fmt.TENSOR_RECORD_SIZE)
            rec[tf["dtype"]] = fmt.DTYPES[t.dtype][0]
            rec[tf["rank"]] = len(t.shape)
            rec[tf["memory"]] = fmt.MEMORY_KINDS[t.memory]
            off = const_offsets[i] if t.memory == "CONSTANT" else offsets[i]
            struct.pack_into("<IIif", rec, tf["offset"], off, t.nbytes, t.zero_point, t.scale)
            dims = list(t.shape) + [0] * (fmt.LIMITS["max_rank"] - len(t.shape))
            if len(dims) > fmt.LIMITS["max_rank"]:
                raise ValueError(f"tensor {i}: rank {len(t.shape)} exceeds {fmt.LIMITS['max_rank']}")
            struct.pack_into(f"<{len(dims)}I", rec, tf["dims"], *dims)
            tensors += rec

        of = fmt.OP_FIELDS
        ops, op_io, params = bytearray(), [], []
        for op in self._ops:
            rec = bytearray(fmt.OP_RECORD_SIZE)
            struct.pack_into("<H", rec, of["opcode"], fmt.OPCODES[op.name]["opcode"])
            rec[of["num_inputs"]] = len(op.inputs)
            rec[of["num_outputs"]] = len(op.outputs)
            struct.pack_into("<IIII", rec, of["io_start"], len(op_io), len(params), len(op.params), op.debug_handle)
            op_io += op.inputs + op.outputs
            params += op.params
            ops += rec

        payloads = {
            "TENSORS": (bytes(tensors), len(self._tensors)),
            "OPS": (bytes(ops), len(self._ops)),
            "OP_IO": (struct.pack(f"<{len(op_io)}H", *op_io), len(op_io)),
            "PARAMS": (struct.pack(f"<{len(params)}i", *params), len(params)),
            "CONSTANTS": (bytes(constants), 0),
            "INPUTS": (struct.pack(f"<{len(self._inputs)}H", *self._inputs), len(self._inputs)),
            "OUTPUTS": (struct.pack(f"<{len(self._outputs)}H", *self._outputs), len(self._outputs)),
        }
        table_offset = fmt.HEADER_SIZE
        cursor = table_offset + fmt.SECTION_ENTRY_SIZE * len(payloads)
        table, body = bytearray(), bytearray()
        for name, (data, count) in payloads.items():
            align = fmt.CONSTANT_ALIGNMENT if name == "CONSTANTS" else 4
            pad = _align(cursor, align) - cursor
            body += bytes(pad)
            cursor += pad
            table += struct.pack("<IIII", fmt.SECTIONS[name][0], cursor, len(data), count)
            body += data
            cursor += len(data)
        blob_size = cursor

        hf = fmt.HEADER_FIELDS
        header = bytearray(fmt.HEADER_SIZE)
        struct.pack_into("<I", header, hf["magic"], fmt.FORMAT_MAGIC)
        struct.pack_into("<HH", header, hf["version"], fmt.FORMAT_VERSION, fmt.HEADER_SIZE)
        struct.pack_into("<I", header, hf["blob_size"], blob_size)
        struct.pack_into("<I", header, hf["arena_size"], arena_size)
        struct.pack_into("<II", header, hf["section_count"], len(payloads), table_offset)
        return bytes(header + table + body)
