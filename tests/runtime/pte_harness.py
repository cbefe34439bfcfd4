"""Helpers of the .pte end-to-end tests: quantize, lower, find the delegates,
read output scales (executorch_espnn.output_scales). (A module of its own,
not conftest: every test directory has a conftest and `from conftest import`
would depend on which one was imported first.)"""

import torch

from executorch_espnn import output_scales  # noqa: F401 - the tests import it from here


def quantize(model, example_inputs, calibration=None):
    """executorch_espnn.quantize, calibrated on the example alone when the test gives no calibration."""
    from executorch_espnn import quantize

    return quantize(model, example_inputs, calibration or [example_inputs])


def lower(quantized, example_inputs):
    from executorch_espnn import to_espnn_edge

    return to_espnn_edge(torch.export.export(quantized, example_inputs))


def delegates(edge, method="forward"):
    """The EspNNBackend LoweredBackendModules of a method, in graph order."""
    from executorch.exir.lowered_backend_module import get_lowered_backend_modules

    return [m for m in get_lowered_backend_modules(edge.exported_program(method).graph_module)
            if m.backend_id == "EspNNBackend"]


def quantize_and_lower(build, shape, calibration_batches: int = 8):
    """A model from `build()` (seed 0, eval), quantized on random batches of
    `shape` (seed 1) and lowered: (quantized, edge manager, the generator,
    for further inputs of the same stream)."""
    torch.manual_seed(0)
    model = build().eval()
    example = (torch.randn(shape),)
    gen = torch.Generator().manual_seed(1)
    q = quantize(model, example, [(torch.randn(shape, generator=gen),) for _ in range(calibration_batches)])
    return q, lower(q, example), gen


def deviation(quantized, pte, make_input, runs: int):
    """(largest deviation in output steps, share of exact elements) of a .pte against its
    convert_pt2e model over `runs` inputs from `make_input(generator)` (seed 2), every output."""
    from executorch_espnn import runtime

    program = runtime.load_program(pte)
    scales = output_scales(quantized)
    worst, exact, total = 0.0, 0, 0
    gen = torch.Generator().manual_seed(2)
    for _ in range(runs):
        x = make_input(gen)
        got = runtime.run_pte(None, [x], program=program)
        with torch.no_grad():
            want = quantized(x)
        for g, w, s in zip(got, want if isinstance(want, (tuple, list)) else [want], scales):
            steps = (g - w).abs() / (s if s else 1.0)
            worst = max(worst, float(steps.max()))
            exact += int((steps < 0.5).sum())
            total += steps.numel()
    return worst, exact / total
