"""Helpers of the .pte end-to-end tests: quantize, lower, find the delegates,
read output scales. (A module of its own, not conftest: every test directory
has a conftest and `from conftest import` would depend on which one was
imported first.)"""

import torch


def quantize(model, example_inputs, calibration=None):
    """export -> EspNNQuantizer -> calibrate -> convert_pt2e."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from executorch_espnn import EspNNQuantizer

    gm = torch.export.export(model.eval(), example_inputs).module(check_guards=False)
    gm = prepare_pt2e(gm, EspNNQuantizer())
    for inputs in calibration or [example_inputs]:
        gm(*inputs)
    return convert_pt2e(gm)


def lower(quantized, example_inputs):
    from executorch_espnn import to_espnn_edge

    return to_espnn_edge(torch.export.export(quantized, example_inputs))


def delegates(edge, method="forward"):
    """The EspNNBackend LoweredBackendModules of a method, in graph order."""
    gm = edge.exported_program(method).graph_module
    mods = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr" and n.target.startswith("lowered_module")]
    return [m for m in mods if m.backend_id == "EspNNBackend"]


def output_scales(quantized):
    """Scale of each output of a convert_pt2e graph (None for a float output
    that is not a dequantize)."""
    out = next(n for n in quantized.graph.nodes if n.op == "output")
    args = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    return [a.args[1] if getattr(a, "target", None) is not None and "dequantize" in str(a.target) else None
            for a in args]
