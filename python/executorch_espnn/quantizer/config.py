"""Quantization configs for ESP-NN's int8 scheme.

ESP-NN runs TFLite's int8 arithmetic, which fixes most of the scheme:

* activations: int8, per-tensor affine, full range [-128, 127];
* weights: int8, symmetric (zero point 0: the conv kernels have no filter offset),
  range [-127, 127], per output channel by default (per tensor optional);
* bias: int32, zero point 0, scale = input scale * weight scale (per channel),
  derived at convert time from the two observers (see ``bias_qspec``);
* softmax/sigmoid outputs: fixed scale 1/256, zero point -128; tanh: 1/128, 0.

A config only chooses what the device does not fix: the observers (or fake-quantize
modules for QAT) and per-channel vs per-tensor weights.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import torch
from torch.fx import Node
from torchao.quantization.pt2e import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PartialWrapper,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
)

ACT_QMIN, ACT_QMAX = -128, 127
WEIGHT_QMIN, WEIGHT_QMAX = -127, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

_PER_CHANNEL = (torch.per_channel_symmetric,)
_PER_TENSOR = (torch.per_tensor_symmetric,)


@dataclasses.dataclass(frozen=True)
class EspNNQuantizationConfig:
    """How one part of the model is quantized (build it with
    :func:`get_espnn_quantization_config`).

    ``activation`` is the spec of every int8 activation observer; ``weight`` the spec
    of conv/linear weights with ``ch_axis`` 0 (the quantizer moves the axis to 1 for
    transposed convolutions). ``is_qat`` selects fake-quantize modules and must be
    the same for every config given to one quantizer.
    """

    activation: QuantizationSpec
    weight: QuantizationSpec
    is_qat: bool = False

    def __post_init__(self) -> None:
        check_config(self)

    @property
    def per_channel(self) -> bool:
        return self.weight.qscheme in _PER_CHANNEL

    def weight_spec(self, ch_axis: int) -> QuantizationSpec:
        """The weight spec for a weight whose output channels are on ``ch_axis``."""
        if not self.per_channel or ch_axis == self.weight.ch_axis:
            return self.weight
        # prepare_pt2e drops the spec's ch_axis for constructors whose class name
        # lacks "PerChannel" (FakeQuantize wrappers), so bind it in the constructor too.
        ctr = bind_args(self.weight.observer_or_fake_quant_ctr, ch_axis=ch_axis)
        return dataclasses.replace(self.weight, ch_axis=ch_axis, observer_or_fake_quant_ctr=ctr)


def bind_args(ctr: Any, **kwargs: Any) -> Any:
    """``ctr.with_args(**kwargs)`` without nesting wrappers: prepare_pt2e reads the class
    name through exactly one ``PartialWrapper(functools.partial(cls, ...))`` level."""
    p = getattr(ctr, "p", None)
    if isinstance(ctr, PartialWrapper) and isinstance(p, functools.partial) and isinstance(p.func, type):
        bound = PartialWrapper(functools.partial(p.func, *p.args, **{**p.keywords, **kwargs}))
        bound.callable_args = dict(ctr.callable_args)
        return bound
    return ctr.with_args(**kwargs)


def check_config(config: Any) -> None:
    """Raise TypeError/ValueError unless ``config`` follows ESP-NN's int8 scheme."""
    if not isinstance(config, EspNNQuantizationConfig):
        raise TypeError(
            f"expected an EspNNQuantizationConfig (see get_espnn_quantization_config) or None, "
            f"got {type(config).__name__}"
        )
    act, w = config.activation, config.weight
    for what, spec in (("activation", act), ("weight", w)):
        if not isinstance(spec, QuantizationSpec):
            raise TypeError(f"{what} spec must be a torchao QuantizationSpec, got {type(spec).__name__}")
        if spec.is_dynamic:
            raise ValueError(f"{what} spec: ESP-NN has no dynamic quantization (is_dynamic=True)")
        if spec.dtype != torch.int8:
            raise ValueError(f"{what} spec: ESP-NN needs dtype torch.int8, got {spec.dtype}")
    if (act.quant_min, act.quant_max) != (ACT_QMIN, ACT_QMAX):
        raise ValueError(
            f"activation spec: ESP-NN needs quant range [{ACT_QMIN}, {ACT_QMAX}], "
            f"got [{act.quant_min}, {act.quant_max}]"
        )
    if act.qscheme not in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        raise ValueError(f"activation spec: ESP-NN needs a per-tensor qscheme, got {act.qscheme}")
    if (w.quant_min, w.quant_max) != (WEIGHT_QMIN, WEIGHT_QMAX):
        raise ValueError(
            f"weight spec: ESP-NN needs the symmetric range [{WEIGHT_QMIN}, {WEIGHT_QMAX}], "
            f"got [{w.quant_min}, {w.quant_max}]"
        )
    if w.qscheme not in _PER_CHANNEL + _PER_TENSOR:
        raise ValueError(
            f"weight spec: ESP-NN needs symmetric weights (zero point 0): qscheme "
            f"per_channel_symmetric or per_tensor_symmetric, got {w.qscheme}"
        )
    if w.qscheme in _PER_CHANNEL and w.ch_axis != 0:
        raise ValueError(f"weight spec: ch_axis must be 0 (output channels), got {w.ch_axis}")


def get_espnn_quantization_config(
    *,
    per_channel: bool = True,
    is_qat: bool = False,
    act_observer: Optional[Any] = None,
    weight_observer: Optional[Any] = None,
) -> EspNNQuantizationConfig:
    """The ESP-NN int8 config.

    Args:
        per_channel: per-output-channel weight scales (default; what TFLite emits) or
            one scale per weight tensor.
        is_qat: fake-quantize modules for ``prepare_qat_pt2e`` instead of observers.
        act_observer: observer / fake-quantize constructor for activations (for
            example ``MinMaxObserver`` or ``HistogramObserver.with_args(bins=1024)``).
            Default: ``HistogramObserver`` (PTQ), ``FusedMovingAvgObsFakeQuantize`` (QAT).
        weight_observer: constructor for weights. Default: ``PerChannelMinMaxObserver`` /
            ``MinMaxObserver`` (PTQ), ``FakeQuantize`` over a moving-average min/max
            observer (QAT). A per-channel PTQ observer's class name must contain
            "PerChannel" (prepare_pt2e passes ``ch_axis`` only to those).
    """
    if act_observer is None:
        act_observer = FusedMovingAvgObsFakeQuantize if is_qat else HistogramObserver
    if weight_observer is None:
        if is_qat:
            obs = MovingAveragePerChannelMinMaxObserver if per_channel else MovingAverageMinMaxObserver
            weight_observer = FakeQuantize.with_args(observer=obs)
        else:
            weight_observer = PerChannelMinMaxObserver if per_channel else MinMaxObserver
    if per_channel:
        weight_observer = bind_args(weight_observer, ch_axis=0)
    activation = QuantizationSpec(
        dtype=torch.int8,
        quant_min=ACT_QMIN,
        quant_max=ACT_QMAX,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=act_observer,
    )
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=WEIGHT_QMIN,
        quant_max=WEIGHT_QMAX,
        qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
        ch_axis=0 if per_channel else None,
        observer_or_fake_quant_ctr=weight_observer,
    )
    return EspNNQuantizationConfig(activation=activation, weight=weight, is_qat=is_qat)


# ---- specs the device fixes -------------------------------------------------------------


def fixed_output_qspec(scale: float, zero_point: int) -> FixedQParamsQuantizationSpec:
    return FixedQParamsQuantizationSpec(
        dtype=torch.int8,
        scale=scale,
        zero_point=zero_point,
        quant_min=ACT_QMIN,
        quant_max=ACT_QMAX,
        qscheme=torch.per_tensor_affine,
    )


# TFLite's int8 softmax and logistic kernels produce exactly this quantization.
SOFTMAX_SIGMOID_OUTPUT = fixed_output_qspec(1.0 / 256.0, -128)
# TFLite's int8 tanh: [-1, 1) in steps of 1/128.
TANH_OUTPUT = fixed_output_qspec(1.0 / 128.0, 0)


def _derive_bias_qparams(
    obs_or_fqs: list, weight_scale_repeats: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """scale = s_in * s_w (one per output channel when the weight is per channel), zp 0.

    A grouped transposed conv has weight scales along axis 1 (Cout/groups of them),
    output channel c using scale c % (Cout/groups): ``weight_scale_repeats`` = groups.
    """
    act_scale, _ = obs_or_fqs[0].calculate_qparams()
    weight_scale, _ = obs_or_fqs[1].calculate_qparams()
    if weight_scale.numel() > 1 and weight_scale_repeats > 1:
        weight_scale = weight_scale.reshape(-1).repeat(weight_scale_repeats)
    scale = (act_scale.to(torch.float64) * weight_scale.to(torch.float64)).to(torch.float32)
    return scale.reshape(-1), torch.zeros(scale.numel(), dtype=torch.int32)


def bias_qspec(
    config: EspNNQuantizationConfig,
    input_node: Node,
    weight_node: Node,
    op_node: Node,
    weight_scale_repeats: int = 1,
):
    """int32 bias derived from the op's input and weight observers (TFLite's recipe)."""
    return DerivedQuantizationSpec(
        derived_from=[(input_node, op_node), (weight_node, op_node)],
        derive_qparams_fn=functools.partial(
            _derive_bias_qparams, weight_scale_repeats=weight_scale_repeats
        ),
        dtype=torch.int32,
        quant_min=INT32_MIN,
        quant_max=INT32_MAX,
        qscheme=torch.per_channel_symmetric if config.per_channel else torch.per_tensor_symmetric,
        # The bias is 1-D over output channels whatever the weight layout is.
        ch_axis=0,
    )
