"""The Python flow from a PyTorch model to ESP-NN delegates, as library calls.

    quantized = quantize(model, example_inputs, calibration)      # int8 GraphModule
    edge = to_espnn_edge(torch.export.export(quantized, example_inputs))
    delegate_payloads(edge)     # XTS3 bytes of each EspNNBackend delegate
    output_scales(quantized)    # each output's int8 step, to compare outputs in LSB

``quantize`` is torchao's PT2E flow with ``EspNNQuantizer``: ``torch.export``,
``prepare_pt2e`` (or ``prepare_qat_pt2e`` and a training step), calibration,
``convert_pt2e``. The ``espnn`` CLI, the examples, the benchmarks and the tests
all quantize through it.
"""

from __future__ import annotations

from typing import Callable, Iterable

from .error_text import one_line

__all__ = ["QuantizationError", "delegate_payloads", "output_scales", "quantize"]


class QuantizationError(RuntimeError):
    """A step of ``quantize`` failed on this model. ``step`` is "export",
    "prepare", "calibrate" or "convert"; ``batch`` the index of the calibration
    batch that failed (None for the other steps); ``__cause__`` the exception
    torch or torchao raised."""

    def __init__(self, step: str, message: str, batch: int | None = None):
        super().__init__(message)
        self.step, self.batch = step, batch


def _check_inputs(model, example_inputs) -> tuple:
    # lazy: torch takes seconds to import; `import executorch_espnn` and `espnn --help` must load without it
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(example_inputs, list):
        example_inputs = tuple(example_inputs)
    if not isinstance(example_inputs, tuple):
        raise TypeError(f"example_inputs must be a tuple of the model's inputs, e.g. (x,); got "
                        f"{type(example_inputs).__name__}")
    return example_inputs


def _batches(calibration):
    """Each calibration item as a tuple of inputs; a bare tensor would be
    unpacked along its first dimension, so it is refused."""
    # lazy: torch takes seconds to import; `import executorch_espnn` and `espnn --help` must load without it
    import torch

    try:
        items = iter(calibration)
    except TypeError:
        raise TypeError(f"calibration must be an iterable of input tuples, got {type(calibration).__name__}") from None
    for k, item in enumerate(items):
        if isinstance(item, list):
            item = tuple(item)
        if not isinstance(item, tuple):
            hint = " (wrap it: (x,))" if isinstance(item, torch.Tensor) else ""
            raise TypeError(f"calibration batch {k} is a {type(item).__name__}; each batch must be a tuple of "
                            f"the model's inputs{hint}")
        yield k, item


def quantize(model, example_inputs, calibration: Iterable | None, *, qat: Callable | None = None,
             quantizer=None):
    """ESP-NN int8 model by PT2E: export, prepare, calibrate, convert.

    model: the float ``torch.nn.Module``. It is exported in eval mode (for
        ``qat``, in train mode) and left in eval mode.
    example_inputs: tuple of the model's inputs, what ``torch.export`` traces.
    calibration: iterable of input tuples, each run once through the prepared
        model so its observers see it; at least one batch for post-training
        quantization. With ``qat`` it runs after training (in eval mode) and
        may be None or empty.
    qat: None for post-training quantization. Else quantization-aware
        training: ``qat(prepared)`` is called once with the
        ``prepare_qat_pt2e`` GraphModule (fake-quantize modules, train mode)
        and trains it, e.g. an optimizer loop over ``prepared.parameters()``.
    quantizer: default ``EspNNQuantizer()`` (with ``qat``, one built from
        ``get_espnn_quantization_config(is_qat=True)``).

    Returns the ``convert_pt2e`` GraphModule: export it and pass it to
    ``to_espnn_edge``. Raises TypeError/ValueError for arguments it cannot
    use, QuantizationError naming the step when torch or torchao fail.
    """
    # lazy: torch, torchao and the quantizer take seconds to import; `espnn --help` must load without them
    import torch
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e

    from .quantizer import EspNNQuantizer, get_espnn_quantization_config

    example_inputs = _check_inputs(model, example_inputs)
    if qat is not None and not callable(qat):
        raise TypeError(f"qat must be a callable that trains the prepared model, got {type(qat).__name__}")
    if calibration is None and qat is None:
        raise ValueError("calibration is required for post-training quantization: an iterable of input tuples")
    if quantizer is None:
        quantizer = EspNNQuantizer(get_espnn_quantization_config(is_qat=True)) if qat is not None else EspNNQuantizer()

    try:
        exported = torch.export.export(model.train() if qat is not None else model.eval(), example_inputs)
        graph = exported.module(check_guards=False)
    except Exception as e:
        raise QuantizationError("export", f"torch.export of the model failed: {one_line(e, typed=True)}") from e
    try:
        prepared = (prepare_qat_pt2e if qat is not None else prepare_pt2e)(graph, quantizer)
    except Exception as e:
        raise QuantizationError("prepare", f"{type(quantizer).__name__} could not prepare the model: "
                                f"{one_line(e, typed=True)}") from e
    if qat is not None:
        qat(prepared)  # the caller's training: its exceptions are its own
        move_exported_model_to_eval(prepared)
        model.eval()
    seen = 0
    with torch.no_grad():
        for k, batch in _batches(calibration if calibration is not None else ()):
            try:
                prepared(*batch)
            except Exception as e:
                raise QuantizationError("calibrate", f"calibration batch {k} failed in the model: "
                                        f"{one_line(e, typed=True)}",
                                        batch=k) from e
            seen += 1
    if not seen and qat is None:
        raise ValueError("calibration gave no batches: post-training quantization needs at least one batch "
                         "of inputs to set the activation scales")
    try:
        return convert_pt2e(prepared)
    except Exception as e:
        raise QuantizationError("convert", f"convert_pt2e failed: {one_line(e, typed=True)}") from e


def output_scales(quantized) -> list:
    """The int8 step (scale) of each output of a ``convert_pt2e`` GraphModule,
    None for an output that is not dequantized from int8 (a float output)."""
    # lazy: torch takes seconds to import; `import executorch_espnn` and `espnn --help` must load without it
    import torch

    out = quantized.graph.output_node().args[0]
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [float(n.args[1]) if isinstance(n, torch.fx.Node) and "dequantize_per_tensor" in str(n.target) else None
            for n in outs]


def delegate_payloads(program, method: str = "forward") -> list[bytes]:
    """The XTS3 payload of each EspNNBackend delegate of a lowered program, in
    graph order. ``program``: an EdgeProgramManager (``to_espnn_edge``), an
    ExecutorchProgramManager or an ExportedProgram."""
    # lazy: executorch and the partition package; `espnn --help` must load without them
    from executorch.exir.lowered_backend_module import get_lowered_backend_modules

    from .partition.report import BACKEND_ID

    ep = program.exported_program(method) if hasattr(program, "exported_program") else program
    return [bytes(m.processed_bytes) for m in get_lowered_backend_modules(ep.graph_module)
            if m.backend_id == BACKEND_ID]
