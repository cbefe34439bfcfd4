"""The XTS3 serializer: a graph of tensors and ops, and a plan for its
arena, -> bytes.

Every constant of the format (magic, version, record layouts, opcodes,
parameter names, limits) comes from the native runtime's header through
``executorch_espnn._native``; nothing about the layout is restated here.
docs/xts3-format.md describes the bytes.

The writer checks what the caller passes (op names, parameter names, tensor
indices) so mistakes surface as a ValueError at the call that made them; the
native parser remains the judge of whether the blob is valid. Where arena
tensors go, which ops run as fused regions and in which order the ops run is
decided before it (executorch_espnn.memory, through
executorch_espnn.xts3_writer.Xts3Writer); the serializer writes the plan it
is given and imports nothing but the format.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .. import _native as fmt


def _native_parse(blob: bytes) -> dict:
    return fmt.parse(blob)


_NUMPY_TO_DTYPE = {np.dtype(np.int8): "INT8", np.dtype(np.int32): "INT32", np.dtype(np.float32): "FLOAT32"}


def _align(value: int, alignment: int) -> int:  # section and constant padding
    return (value + alignment - 1) // alignment * alignment


def _fields_in_version(op_name: str, version: int) -> int:
    """How many of the opcode's parameter fields a blob of ``version`` has
    (fields a later version appended come last)."""
    return sum(1 for v in fmt.OPCODES[op_name]["param_versions"] if v <= version)


def _op_version(op: "_Op") -> int:
    """The oldest version that can hold ``op``: its opcode's, or that of the
    last appended field it sets to other than 0."""
    spec = fmt.OPCODES[op.name]
    return max([spec["min_version"]] + [v for v, word in zip(spec["param_versions"], op.params) if word != 0])


@dataclass
class _Tensor:
    shape: tuple[int, ...]
    dtype: str
    memory: str  # "ARENA" or "CONSTANT"
    scale: float = 0.0
    zero_point: int = 0
    data: bytes | None = None  # constants only
    offset: int | None = None  # arena offset fixed by the caller (tests that build a plan by hand)
    nbytes_override: int | None = None  # a BANDED tensor's band buffer (fused regions)
    external: bool = False  # EXTERNAL graph input or output: the caller's bytes, no arena space

    @property
    def in_arena(self) -> bool:
        return self.memory == "ARENA" and not self.external

    @property
    def nbytes(self) -> int:
        if self.nbytes_override is not None:
            return self.nbytes_override
        return int(np.prod(self.shape, dtype=np.int64)) * fmt.DTYPES[self.dtype][1]


@dataclass
class _Op:
    name: str
    inputs: list[int]
    outputs: list[int]
    params: list[int]
    debug_handle: int = 0


@dataclass
class Xts3Serializer:
    """Builds an XTS3 graph and writes it with a given arena plan. Tensor
    and op indices are returned as ints."""

    _tensors: list[_Tensor] = field(default_factory=list)
    _ops: list[_Op] = field(default_factory=list)
    _inputs: list[int] = field(default_factory=list)
    _outputs: list[int] = field(default_factory=list)

    @classmethod
    def from_blob(cls, blob: bytes) -> "Xts3Serializer":
        """The graph of a layer-by-layer blob (no fused regions), to be planned
        and written again (e.g. with fused regions). Arena offsets are not
        kept: the caller plans them again."""
        s = _native_parse(blob)
        if any(op["op"] == "BAND_LOOP" for op in s["ops"]):
            raise ValueError("the blob already has fused regions")
        table = struct.unpack_from("<I", blob, fmt.HEADER_FIELDS["section_table"])[0]
        const_base = None
        for k in range(len(fmt.SECTIONS)):
            kind, offset = struct.unpack_from("<II", blob, table + k * fmt.SECTION_ENTRY_SIZE)
            if kind == fmt.SECTIONS["CONSTANTS"][0]:
                const_base = offset
        w = cls()
        for t in s["tensors"]:
            if t["memory"] == "CONSTANT":
                data = bytes(blob[const_base + t["offset"]:const_base + t["offset"] + t["nbytes"]])
                w._tensors.append(_Tensor(tuple(t["shape"]), t["dtype"], "CONSTANT", t["scale"], t["zero_point"], data))
            else:
                w._tensors.append(_Tensor(tuple(t["shape"]), t["dtype"], "ARENA", t["scale"], t["zero_point"],
                                          external=bool(t["flags"] & fmt.TENSOR_FLAGS["EXTERNAL"])))
        for op in s["ops"]:
            names = fmt.OPCODES[op["op"]]["params"]
            w._ops.append(_Op(op["op"], [fmt.NO_TENSOR if t is None else t for t in op["inputs"]],
                              list(op["outputs"]), [op["params"][n] for n in names], op["debug_handle"]))
        w._inputs, w._outputs = list(s["inputs"]), list(s["outputs"])
        return w

    # -- tensors ---------------------------------------------------------------
    def tensor(self, shape: Sequence[int], dtype: str = "INT8", *, scale: float = 0.0,
               zero_point: int = 0, offset: int | None = None, external: bool = False) -> int:
        """An activation tensor (lives in the arena). ``external``: a FLOAT32
        graph input the caller binds at Invoke (EXTERNAL flag, no arena bytes)."""
        if dtype not in fmt.DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; XTS3 has {sorted(fmt.DTYPES)}")
        self._tensors.append(_Tensor(tuple(int(d) for d in shape), dtype, "ARENA", float(scale),
                                     int(zero_point), offset=offset, external=external))
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
        """Appends an op; ``params`` must name exactly the opcode's fields,
        except fields a later format version appended (0 when left out: what
        the opcode did before them)."""
        spec = fmt.OPCODES.get(name)
        if spec is None:
            raise ValueError(f"unknown op {name!r}; XTS3 has {sorted(fmt.OPCODES)}")
        names = spec["params"]
        appended = set(names[_fields_in_version(name, spec["min_version"]):])
        missing = [n for n in names if n not in params and n not in appended]
        extra = [n for n in params if n not in names]
        if missing or extra:
            raise ValueError(f"{name}: missing params {missing}, unknown params {extra}; fields are {list(names)}")
        words = []
        for n in names:
            v = params.get(n, 0)
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

    def mark_external_inputs(self) -> list[int]:
        """Makes EXTERNAL every FLOAT32 graph input that only QUANTIZE ops
        read and that is no graph output: the caller's tensor is then read in
        place, with no arena bytes and no copy. Always done by the lowering: it
        never costs memory or time. Returns the tensors marked."""
        marked = []
        for t in self._inputs:
            tensor = self._tensors[t]
            readers = [op for op in self._ops if t in op.inputs]
            if (tensor.dtype == "FLOAT32" and tensor.memory == "ARENA" and t not in self._outputs
                    and readers and all(op.name == "QUANTIZE" and t not in op.outputs for op in readers)):
                tensor.external = True
                marked.append(t)
        return marked

    def mark_external_outputs(self) -> list[int]:
        """Makes EXTERNAL every FLOAT32 graph output that a DEQUANTIZE writes,
        that no op reads, that is listed once and that is no graph input: the
        DEQUANTIZE then writes the caller's tensor (Interpreter::BindOutput),
        so the float result, four times its int8 source, takes no arena bytes
        and is not copied out. Always done by the lowering. Returns the
        tensors marked."""
        marked = []
        for t in self._outputs:
            tensor = self._tensors[t]
            writers = [op for op in self._ops if t in op.outputs]
            if (tensor.dtype == "FLOAT32" and tensor.memory == "ARENA" and not tensor.external
                    and self._outputs.count(t) == 1 and t not in self._inputs
                    and [op.name for op in writers] == ["DEQUANTIZE"]
                    and not any(t in op.inputs for op in self._ops)):
                tensor.external = True
                marked.append(t)
        return marked

    def fold_dequantize_transposes(self) -> list[int]:
        """Folds each TRANSPOSE NHWC -> NCHW (last dim moved to 1) that only a
        DEQUANTIZE reads into that DEQUANTIZE (its ``channels_last``): the
        int8 NHWC result is then dequantized straight into the NCHW float
        layout, and the int8 NCHW copy, live next to the NHWC one (2 x
        1,053,696 B for LR-ASPP's 224x224x21 logits), is gone. The values are
        the same. Returns the indices the removed TRANSPOSE ops had (each also
        leaves one tensor fewer)."""
        flag = fmt.OPCODES["DEQUANTIZE"]["params"].index("channels_last")
        removed = []
        for i, op in enumerate(self._ops):
            if op.name != "TRANSPOSE":
                continue
            mid = op.outputs[0]
            rank = len(self._tensors[mid].shape)
            readers = [r for r in self._ops if mid in r.inputs]
            if (rank >= 3 and op.params[:rank] == [0, rank - 1, *range(1, rank - 1)] and len(readers) == 1
                    and readers[0].name == "DEQUANTIZE" and readers[0].params[flag] == 0
                    and mid not in self._outputs and mid not in self._inputs):
                readers[0].inputs = [op.inputs[0]]
                readers[0].params[flag] = 1
                removed.append((i, mid))
        return self._drop_folded(removed)

    def fold_quantize_transposes(self) -> list[int]:
        """Folds each TRANSPOSE NCHW -> NHWC (dim 1 moved last) of a QUANTIZE
        output that nothing else reads into the QUANTIZE (its
        ``channels_last``): the float input is then quantized straight into
        the layout the TRANSPOSE made, and the int8 NCHW copy, which was live
        next to the NHWC one (2 x 150,528 B on a 224x224 RGB image), is gone.
        The values are the same bytes. Returns the indices the removed
        TRANSPOSE ops had (each also leaves one tensor fewer)."""
        flag = fmt.OPCODES["QUANTIZE"]["params"].index("channels_last")
        removed = []
        for i, op in enumerate(self._ops):
            if op.name != "TRANSPOSE":
                continue
            src = op.inputs[0]
            rank = len(self._tensors[src].shape)
            writers = [q for q in self._ops if src in q.outputs]
            readers = [r for r in self._ops if src in r.inputs]
            if (rank >= 3 and op.params[:rank] == [0, *range(2, rank), 1] and len(writers) == 1
                    and writers[0].name == "QUANTIZE" and writers[0].params[flag] == 0 and readers == [op]
                    and src not in self._outputs and src not in self._inputs):
                writers[0].outputs = list(op.outputs)
                writers[0].params[flag] = 1
                removed.append((i, src))
        return self._drop_folded(removed)

    def _drop_folded(self, removed: list[tuple[int, int]]) -> list[int]:
        """Removes each folded (op index, tensor) pair's op and tensor, which
        nothing names any more; returns the removed ops' indices."""
        for _, t in sorted(removed, key=lambda r: -r[1]):
            self._drop_tensor(t)
        gone = {i for i, _ in removed}
        self._ops = [op for i, op in enumerate(self._ops) if i not in gone]
        return sorted(gone)

    def _drop_tensor(self, t: int) -> None:
        """Removes tensor ``t``, which no op and no graph input or output
        names any more; the tensors after it move down by one."""
        def renumber(index: int) -> int:
            return index - 1 if index != fmt.NO_TENSOR and index > t else index

        del self._tensors[t]
        for op in self._ops:
            op.inputs = [renumber(x) for x in op.inputs]
            op.outputs = [renumber(x) for x in op.outputs]
        self._inputs = [renumber(x) for x in self._inputs]
        self._outputs = [renumber(x) for x in self._outputs]

    def set_outputs(self, tensors: Iterable[int]) -> None:
        self._outputs = [self._check_index(t) for t in tensors]

    def _check_index(self, t: int) -> int:
        if not 0 <= int(t) < len(self._tensors):
            raise ValueError(f"tensor index {t} does not exist (have {len(self._tensors)})")
        return int(t)

    # -- what the memory planner reads -----------------------------------------------
    def pinned_offsets(self) -> dict[int, int]:
        """Arena tensor -> the offset its caller fixed (``tensor(offset=)``)."""
        return {i: t.offset for i, t in enumerate(self._tensors) if t.in_arena and t.offset is not None}

    def reorder_ops(self, order: Sequence[int]) -> None:
        """Puts the ops in ``order`` (new position -> old op index), e.g.
        executorch_espnn.memory.memory_order's."""
        if sorted(order) != list(range(len(self._ops))):
            raise ValueError(f"{list(order)} is not a permutation of the {len(self._ops)} ops")
        self._ops = [self._ops[i] for i in order]

    # -- bytes -------------------------------------------------------------------
    def format_version(self, ops: Sequence[_Op] | None = None) -> int:
        """The oldest format version that has every opcode this graph uses
        (fused regions: BAND_LOOP's), tensor flag (EXTERNAL: version 2; on a
        graph output: version 5) and parameter field set to other than 0
        (fields appended later, e.g. QUANTIZE's channels_last: version 4): a
        graph without newer features stays readable by older runtimes."""
        ops = self._ops if ops is None else ops
        flags = [fmt.TENSOR_FLAG_MIN_VERSION] if any(t.external for t in self._tensors) else []
        if any(self._tensors[t].external for t in self._outputs):
            flags.append(fmt.EXTERNAL_OUTPUT_MIN_VERSION)
        return max([fmt.MIN_FORMAT_VERSION] + flags + [_op_version(op) for op in ops])

    def _with_regions(self, regions) -> tuple[list[_Tensor], list[_Op], dict[int, int]]:
        """Tensors and ops with the plan's fused regions written in: a
        BAND_LOOP before each region, staging tensors appended, BANDED
        tensors at their band-buffer size. Also: tensor -> flags."""
        tensors, ops, flags = list(self._tensors), [], {}
        starts = {lay.region.first_op: lay for lay in regions}
        banded = fmt.TENSOR_FLAGS["BANDED"]
        for lay in regions:
            for t, rows in lay.banded_rows.items():
                old = tensors[t]
                tensors[t] = _Tensor(old.shape, old.dtype, old.memory, old.scale, old.zero_point, old.data,
                                     old.offset, nbytes_override=rows * old.shape[2] * old.shape[3])
                flags[t] = banded
            if lay.staging is not None:
                if lay.staging != len(tensors):
                    raise ValueError("staging tensors must follow the graph's tensors in region order")
                tensors.append(_Tensor(lay.staging_shape, "INT8", "ARENA"))
        for i, op in enumerate(self._ops):
            if i in starts:
                r = starts[i].region
                ops.append(_Op("BAND_LOOP", [], [] if starts[i].staging is None else [starts[i].staging],
                               [r.num_ops, r.band_rows, fmt.BAND_FLAGS["IN_PLACE"] if r.in_place else 0]))
            ops.append(op)
        return tensors, ops, flags

    def to_bytes(self, plan) -> bytes:
        """The blob with ``plan``'s arena offsets and fused regions. ``plan``
        is what executorch_espnn.memory.plan_arena returns (an ArenaPlan):
        ``offsets`` (arena tensor -> offset), ``arena_size`` and ``regions``
        (each fused region's layout)."""
        offsets, arena_size = plan.offsets, plan.arena_size
        all_tensors, all_ops, flags = self._with_regions(plan.regions)

        constants = bytearray()
        const_offsets: dict[int, int] = {}
        for i, t in enumerate(all_tensors):
            if t.memory == "CONSTANT":
                # 16-byte aligned: satisfies every dtype's natural alignment
                # and the SIMD loads on the ESP32-S3.
                constants += bytes(_align(len(constants), fmt.CONSTANT_ALIGNMENT) - len(constants))
                const_offsets[i] = len(constants)
                constants += t.data

        tf = fmt.TENSOR_FIELDS
        tensors = bytearray()
        for i, t in enumerate(all_tensors):
            rec = bytearray(fmt.TENSOR_RECORD_SIZE)
            rec[tf["dtype"]] = fmt.DTYPES[t.dtype][0]
            rec[tf["rank"]] = len(t.shape)
            rec[tf["memory"]] = fmt.MEMORY_KINDS[t.memory]
            rec[tf["flags"]] = flags.get(i, 0) | (fmt.TENSOR_FLAGS["EXTERNAL"] if t.external else 0)
            off = const_offsets[i] if t.memory == "CONSTANT" else 0 if t.external else offsets[i]
            struct.pack_into("<IIif", rec, tf["offset"], off, t.nbytes, t.zero_point, t.scale)
            dims = list(t.shape) + [0] * (fmt.LIMITS["max_rank"] - len(t.shape))
            if len(dims) > fmt.LIMITS["max_rank"]:
                raise ValueError(f"tensor {i}: rank {len(t.shape)} exceeds {fmt.LIMITS['max_rank']}")
            struct.pack_into(f"<{len(dims)}I", rec, tf["dims"], *dims)
            tensors += rec

        version = self.format_version(all_ops)
        of = fmt.OP_FIELDS
        ops, op_io, params = bytearray(), [], []
        for op in all_ops:
            # The fields the blob's version has (appended ones left out are 0).
            words = op.params[:_fields_in_version(op.name, version)]
            rec = bytearray(fmt.OP_RECORD_SIZE)
            struct.pack_into("<H", rec, of["opcode"], fmt.OPCODES[op.name]["opcode"])
            rec[of["num_inputs"]] = len(op.inputs)
            rec[of["num_outputs"]] = len(op.outputs)
            struct.pack_into("<IIII", rec, of["io_start"], len(op_io), len(params), len(words), op.debug_handle)
            op_io += op.inputs + op.outputs
            params += words
            ops += rec

        payloads = {
            "TENSORS": (bytes(tensors), len(all_tensors)),
            "OPS": (bytes(ops), len(all_ops)),
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
        struct.pack_into("<HH", header, hf["version"], version, fmt.HEADER_SIZE)
        struct.pack_into("<I", header, hf["blob_size"], blob_size)
        struct.pack_into("<I", header, hf["arena_size"], arena_size)
        struct.pack_into("<II", header, hf["section_count"], len(payloads), table_offset)
        return bytes(header + table + body)
