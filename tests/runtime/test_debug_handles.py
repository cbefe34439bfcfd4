"""EspNNBackend.preprocess returns a debug_handle_map for the Inspector.

Keys: the debug handle written in each XTS3 op record (what the C++ delegate
logs as the delegate debug index of the op's profiling event). Values: the
debug handles of the edge-graph nodes the op was lowered from.
"""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from pte_harness import delegates, quantize  # noqa: E402
from executorch_espnn import _native  # noqa: E402


class ConvReluLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.fc(torch.flatten(y, 1))


@pytest.fixture(scope="module")
def lowered():
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from executorch_espnn import EspNNPartitioner

    torch.manual_seed(0)
    example = (torch.randn(1, 3, 6, 6),)
    q = quantize(ConvReluLinear(), example)
    # to_espnn_edge's call, with an ETRecord: it keeps the edge graph as it was
    # before partitioning, which is what the Inspector resolves handles in.
    edge = to_edge_transform_and_lower(torch.export.export(q, example), partitioner=[EspNNPartitioner()],
                                       compile_config=EdgeCompileConfig(), generate_etrecord=True)
    (lm,) = delegates(edge)
    return edge, lm


def _handles(graph):
    """debug handle -> targets of the nodes carrying it (ExecuTorch gives a
    quantize/dequantize the handle of the node it quantizes)."""
    out = {}
    for n in graph.nodes:
        if isinstance(n.meta.get("debug_handle"), int):
            out.setdefault(n.meta["debug_handle"], set()).add(str(n.target))
    return out


def test_map_covers_every_op_of_the_payload(lowered):
    _, lm = lowered
    dmap = lm.meta["debug_handle_map"]  # where ExecuTorch stores PreprocessResult.debug_handle_map
    ops = _native.Program(bytes(lm.processed_bytes)).summary()["ops"]
    assert ops and {op["debug_handle"] for op in ops} == set(dmap)
    assert all(op["debug_handle"] > 0 for op in ops)
    assert all(dmap[op["debug_handle"]] for op in ops), "an op maps to no source node"


def test_handles_are_nodes_of_the_edge_graph(lowered):
    edge, lm = lowered
    before = _handles(edge._etrecord.edge_dialect_program.graph)  # edge graph before partitioning
    partition = _handles(lm.original_module.graph)
    dmap = lm.meta["debug_handle_map"]
    for key, handles in dmap.items():
        assert key in handles, "an op's identifier is its own node's handle"
        for h in handles:
            assert h in before and h in partition, h
            assert partition[h] <= before[h]


def test_ops_map_to_the_nodes_they_came_from(lowered):
    edge, lm = lowered
    before = _handles(edge._etrecord.edge_dialect_program.graph)
    dmap = lm.meta["debug_handle_map"]
    ops = _native.Program(bytes(lm.processed_bytes)).summary()["ops"]

    def sources(opcode):
        (op,) = [o for o in ops if o["op"] == opcode]
        return set().union(*(before[h] for h in dmap[op["debug_handle"]]))

    conv = sources("CONV2D")
    assert any("convolution" in t for t in conv), conv
    assert any("relu" in t for t in conv), conv  # the fused activation counts for the conv
    assert any("dequantize_per_channel" in t for t in conv), conv  # its weights
    fc = sources("FULLY_CONNECTED")
    assert any("linear" in t for t in fc), fc
    assert not any("convolution" in t for t in fc), fc


def test_inspector_resolves_the_delegate_profiling_events(tmp_path):
    """End to end: the C++ delegate's per-op events (ETDump) carry the op
    record's handle as delegate debug index; the Inspector finds it in the
    map (via the ETRecord) and names the source ops."""
    from executorch.devtools import Inspector
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from executorch_espnn import EspNNPartitioner

    torch.manual_seed(0)
    example = (torch.randn(1, 3, 6, 6),)
    q = quantize(ConvReluLinear(), example)
    edge = to_edge_transform_and_lower(torch.export.export(q, example), partitioner=[EspNNPartitioner()],
                                       compile_config=EdgeCompileConfig(), generate_etrecord=True)
    (lm,) = delegates(edge)
    dmap = dict(lm.meta["debug_handle_map"])
    program = edge.to_executorch()
    program.get_etrecord().save(str(tmp_path / "etrecord.bin"))
    module = _load_for_executorch_from_buffer(program.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    module.run_method("forward", (example[0],))
    module.write_etdump_result_to_file(str(tmp_path / "etdump.etdp"), str(tmp_path / "debug.bin"))

    inspector = Inspector(etdump_path=str(tmp_path / "etdump.etdp"), etrecord=str(tmp_path / "etrecord.bin"))
    events = [e for block in inspector.event_blocks for e in block.events
              if e.delegate_backend_name == "EspNNBackend" and e.delegate_debug_identifier is not None]
    assert {int(e.delegate_debug_identifier) for e in events} == set(dmap)
    for e in events:
        assert sorted(e.debug_handles) == sorted(dmap[int(e.delegate_debug_identifier)])
    op_types = {t for e in events for t in e.op_types}
    assert {"aten.convolution.default", "aten.relu.default", "aten.linear.default"} <= op_types
