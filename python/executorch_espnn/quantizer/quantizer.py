"""EspNNQuantizer: the PT2E quantizer for ESP-NN's int8 scheme.

Usage::

    gm = torch.export.export(model.eval(), example_inputs).module()
    quantizer = EspNNQuantizer()                       # global: default int8 config
    quantizer.set_module_name("head", None)            # keep model.head float
    prepared = prepare_pt2e(gm, quantizer)
    for x in calibration_data: prepared(x)
    quantized = convert_pt2e(prepared)

    # the same steps in one call:
    quantized = executorch_espnn.quantize(model, example_inputs, calibration, quantizer=quantizer)

Which config governs a node: the innermost module named with ``set_module_name``
that contains it, else the innermost module whose type was given to
``set_module_type``, else the global config. ``None`` keeps that part float, and every
annotator (fused activations, softmax and other unary ops, shared-qparam propagation)
asks the same question, so a ``None`` module's conv+relu, softmax and data movement
all stay float.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    Quantizer,
    QuantizationSpec,
    get_module_name_filter,
)

from . import ops
from .activations import annotate_global_average, annotate_norm, annotate_unary
from .attention import annotate_masked_softmax, decompose_attention
from .annotation import get_annotation
from .config import EspNNQuantizationConfig, check_config, get_espnn_quantization_config
from .conv_linear import add_zero_bias_before_qat_batch_norm, annotate_conv_linear
from .elementwise import annotate_add_mul, scalars_to_constants
from .matmul import annotate_matmul
from .recurrent import annotate_recurrent, rewrite_recurrent
from .shared import annotate_shared, share_producer_qparams

_DEFAULT = object()

# Annotator order: patterns that own several nodes (conv/linear + bn + activation,
# add/mul + activation) claim them first, then single ops with their own observers,
# and shared-qparam propagation last because it reads its producers' annotations.
_ANNOTATORS = (
    annotate_conv_linear,
    annotate_add_mul,
    annotate_matmul,
    annotate_recurrent,
    annotate_global_average,
    annotate_norm,
    annotate_masked_softmax,
    annotate_unary,
    annotate_shared,
)


def _type_name(t) -> str:
    return t if isinstance(t, str) else f"{t.__module__}.{t.__qualname__}"


def check_exported_graph(model, what: str) -> None:
    """Raise TypeError unless ``model`` is the GraphModule of a torch.export program."""
    if isinstance(model, torch.export.ExportedProgram):
        raise TypeError(
            f"EspNNQuantizer.{what}: got an ExportedProgram; pass its graph module: "
            "prepare_pt2e(torch.export.export(model, args).module(), quantizer)"
        )
    if not isinstance(model, GraphModule):
        raise TypeError(
            f"EspNNQuantizer.{what}: expected the torch.fx.GraphModule returned by "
            f"torch.export.export(model, args).module(), got {type(model).__name__}"
        )
    for node in model.graph.nodes:
        # torch.export records a FakeTensor "val" on every placeholder and op; the
        # annotators need it (dtypes, shapes). symbolic_trace graphs have none.
        if node.op in ("placeholder", "call_function") and "val" not in node.meta:
            raise TypeError(
                f"EspNNQuantizer.{what}: node '{node.name}' ({node.target}) has no 'val' "
                "metadata: this graph was not produced by torch.export (torch.fx.symbolic_trace "
                "graphs are not supported); use torch.export.export(model, args).module()"
            )


class EspNNQuantizer(Quantizer):
    """Annotates an exported graph with ESP-NN's int8 scheme (see ``config.py``)."""

    def __init__(self, config: Optional[EspNNQuantizationConfig] = _DEFAULT) -> None:  # type: ignore
        super().__init__()
        if config is _DEFAULT:
            config = get_espnn_quantization_config()
        self.global_config: Optional[EspNNQuantizationConfig] = None
        self.module_type_config: dict[type, Optional[EspNNQuantizationConfig]] = {}
        self.module_name_config: dict[str, Optional[EspNNQuantizationConfig]] = {}
        self.set_global(config)

    # ---- configuration ----------------------------------------------------------------

    @staticmethod
    def _checked(config):
        if config is not None:
            check_config(config)
            for what, spec in (("activation", config.activation), ("weight", config.weight)):
                _check_observer_args(what, spec)
        return config

    def set_global(self, config: Optional[EspNNQuantizationConfig]) -> "EspNNQuantizer":
        """Config for every node not covered by a module type/name config (None = float)."""
        self.global_config = self._checked(config)
        return self

    def set_module_type(
        self, module_type: type, config: Optional[EspNNQuantizationConfig]
    ) -> "EspNNQuantizer":
        """Config for the nodes inside every submodule of this type (None = float)."""
        if not isinstance(module_type, type):
            raise TypeError(
                f"set_module_type expects a class such as torch.nn.Conv2d, got {module_type!r}"
            )
        self.module_type_config[module_type] = self._checked(config)
        return self

    def set_module_name(
        self, module_name: str, config: Optional[EspNNQuantizationConfig]
    ) -> "EspNNQuantizer":
        """Config for the nodes inside the submodule with this qualified name, e.g.
        ``"features.3"`` (None = float)."""
        if not isinstance(module_name, str):
            raise TypeError(
                f"set_module_name expects a qualified module name (str), got {module_name!r}"
            )
        self.module_name_config[module_name] = self._checked(config)
        return self

    def _configs(self) -> list[EspNNQuantizationConfig]:
        configs = [self.global_config, *self.module_type_config.values(), *self.module_name_config.values()]
        return [c for c in configs if c is not None]

    def _resolver(self) -> Callable[[Node], Optional[EspNNQuantizationConfig]]:
        name_filters = [
            (name, get_module_name_filter(name), cfg) for name, cfg in self.module_name_config.items()
        ]
        # Longest name first: the innermost named module wins.
        name_filters.sort(key=lambda item: len(item[0]), reverse=True)
        type_configs = {_type_name(t): cfg for t, cfg in self.module_type_config.items()}
        cache: dict[Node, Optional[EspNNQuantizationConfig]] = {}

        def resolve(node: Node) -> Optional[EspNNQuantizationConfig]:
            if node in cache:
                return cache[node]
            config = self.global_config
            matched = False
            for _, name_filter, cfg in name_filters:
                if name_filter(node):
                    config, matched = cfg, True
                    break
            if not matched and type_configs:
                stack = node.meta.get("nn_module_stack") or {}
                # nn_module_stack is ordered outermost -> innermost.
                for _, module_type in reversed(list(stack.values())):
                    if _type_name(module_type) in type_configs:
                        config = type_configs[_type_name(module_type)]
                        break
            cache[node] = config
            return config

        return resolve

    # ---- Quantizer interface ----------------------------------------------------------

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        check_exported_graph(model, "transform_for_annotation")
        if any(c.is_qat for c in self._configs()):
            model = add_zero_bias_before_qat_batch_norm(model)
        model = rewrite_recurrent(model, self._resolver())
        return scalars_to_constants(decompose_attention(model))

    def annotate(self, model: GraphModule) -> GraphModule:
        check_exported_graph(model, "annotate")
        if len({c.is_qat for c in self._configs()}) > 1:
            raise ValueError(
                "EspNNQuantizer: all configs must agree on is_qat (mixing prepare_pt2e and "
                "prepare_qat_pt2e observers in one model is not supported)"
            )
        resolve = self._resolver()
        for annotator in _ANNOTATORS:
            annotator(model, resolve)
        share_producer_qparams(model)
        return model

    def validate(self, model: GraphModule) -> None:
        """Reject graphs the int8 scheme cannot serve: training-mode ops under a PTQ
        config and annotations (e.g. from another quantizer) with non-ESP-NN dtypes."""
        is_qat = any(c.is_qat for c in self._configs())
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            if not is_qat and node.target in ops.TRAINING_ONLY:
                arg_name, index = ops.TRAINING_ONLY[node.target]
                flag = node.args[index] if len(node.args) > index else node.kwargs.get(arg_name, False)
                if flag:
                    raise RuntimeError(
                        f"EspNNQuantizer: node '{node.name}' ({node.target}) runs in training mode: "
                        "call model.eval() before torch.export.export for post-training quantization, "
                        "or use get_espnn_quantization_config(is_qat=True) with prepare_qat_pt2e"
                    )
            ann = get_annotation(node)
            if ann is None:
                continue
            specs = list(ann.input_qspec_map.items()) + [(node, ann.output_qspec)]
            for edge_src, spec in specs:
                _check_spec(node, edge_src, spec)


# Legacy quantized dtypes an observer may be bound to, as the plain dtype of the spec.
_PLAIN_DTYPE = {torch.qint8: torch.int8, torch.quint8: torch.uint8, torch.qint32: torch.int32}


def _bound_kwargs(ctr) -> dict:
    """Keyword arguments bound into an observer constructor by (nested) ``with_args``."""
    p = getattr(ctr, "p", None)
    if not isinstance(p, functools.partial):
        return {}
    return {**_bound_kwargs(p.func), **p.keywords}


def _check_observer_args(what: str, spec) -> None:
    """prepare_pt2e builds each observer with the spec's dtype/range/qscheme, silently
    overriding what the constructor was bound to: an observer bound to another scheme
    (``MinMaxObserver.with_args(dtype=torch.quint8)``) is a mistake, reject it."""
    bound = _bound_kwargs(spec.observer_or_fake_quant_ctr)
    for key in ("dtype", "quant_min", "quant_max", "qscheme"):
        if key not in bound:
            continue
        got, want = bound[key], getattr(spec, key)
        if key == "dtype":
            got = _PLAIN_DTYPE.get(got, got)
        if got != want:
            raise ValueError(
                f"EspNNQuantizer: the {what} observer is bound to {key}={bound[key]}, but ESP-NN's "
                f"{what} spec has {key}={want}, which prepare_pt2e would silently use instead; "
                f"drop {key} from the observer's with_args (ESP-NN runs int8 only)"
            )


def _check_spec(node: Node, src: Node, spec) -> None:
    where = f"node '{node.name}'" + (f" (input '{src.name}')" if src is not node else " (output)")
    if isinstance(spec, DerivedQuantizationSpec):
        if spec.dtype != torch.int32:
            raise ValueError(
                f"EspNNQuantizer: {where}: a derived (bias) spec must be int32, got {spec.dtype}"
            )
    elif isinstance(spec, (QuantizationSpec, FixedQParamsQuantizationSpec)):
        if spec.dtype != torch.int8 or spec.is_dynamic:
            raise ValueError(
                f"EspNNQuantizer: {where}: ESP-NN runs static int8 only, got dtype {spec.dtype}"
                + (" (dynamic)" if spec.is_dynamic else "")
            )
