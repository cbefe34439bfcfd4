"""The ATen ops each annotator handles, grouped by how ESP-NN quantizes them.

These are the ops as they appear in ``torch.export.export(...).module()`` (pre-dispatch
ATen), which is what prepare_pt2e hands to the quantizer.
"""

import operator

import torch

aten = torch.ops.aten

CONV = {
    aten.conv1d.default,
    aten.conv1d.padding,
    aten.conv2d.default,
    aten.conv2d.padding,
}
# Weights are [Cin, Cout/groups, k...]: output channels on axis 1.
CONV_TRANSPOSE = {
    aten.conv_transpose1d.default,
    aten.conv_transpose2d.input,
}
LINEAR = {aten.linear.default}

# Batch norm between a conv and its activation only survives annotation in QAT
# (prepare_pt2e folds it first; prepare_qat_pt2e folds it after annotation).
BATCH_NORM = {
    aten.batch_norm.default,
    aten._native_batch_norm_legit.default,
    aten._native_batch_norm_legit_no_training.default,
}

# Clamping activations that fold into the producing op's output (ESP-NN act_min/act_max).
FUSABLE_ACTIVATIONS = {
    aten.relu.default,
    aten.relu_.default,
    aten.relu6.default,
    aten.hardtanh.default,
    aten.hardtanh_.default,
    aten.clamp.default,
    aten.clamp_.default,
}

ADD_MUL = {
    aten.add.Tensor,
    aten.add_.Tensor,
    aten.sub.Tensor,
    aten.sub_.Tensor,
    aten.mul.Tensor,
    aten.mul_.Tensor,
}
# Products of two activations (both operands observed, per tensor).
MATMUL = {aten.matmul.default, aten.bmm.default}
# nn.GRU / nn.LSTM as export keeps them (one op over the whole sequence).
RECURRENT = {aten.gru.input, aten.lstm.input}
# other - x: rewritten to sub(other, x) before annotation.
RSUB = {aten.rsub.Scalar, aten.rsub.Tensor}
# x / c for a Python number c: rewritten to mul(x, 1 / c) before annotation.
DIV = {aten.div.Tensor}

# Output quantization fixed by the int8 kernels (TFLite semantics).
SOFTMAX = {aten.softmax.int, aten._softmax.default}
SIGMOID = {aten.sigmoid.default, aten.sigmoid_.default}
TANH = {aten.tanh.default, aten.tanh_.default}

# Element-wise non-linear ops that get their own output observer: the lowering turns
# them into a 256-entry LUT (or HARD_SWISH), which requantizes freely.
UNARY_OWN_OUTPUT = {
    aten.hardswish.default,
    aten.hardswish_.default,
    aten.hardsigmoid.default,
    aten.hardsigmoid_.default,
    aten.silu.default,
    aten.silu_.default,
    aten.gelu.default,
    aten.elu.default,
    aten.elu_.default,
    aten.leaky_relu.default,
    aten.leaky_relu_.default,
    aten.selu.default,
    aten.selu_.default,
    aten.celu.default,
    aten.celu_.default,
    aten.mish.default,
    aten.mish_.default,
    aten.softplus.default,
    aten.log_sigmoid.default,
}
# prelu: the same, when its weight is one slope or one per channel (the second argument stays float).
PRELU = {aten.prelu.default}

# Layer norm / RMS norm over the last dim (LAYER_NORM): own input and output
# observers; weight and bias stay float (the lowering folds them).
NORM = {aten.layer_norm.default, aten.rms_norm.default}

# Reductions that requantize (MEAN_HW): own input and output observers.
MEAN = {aten.mean.dim}
ADAPTIVE_AVG_POOL = {aten.adaptive_avg_pool2d.default, aten.adaptive_avg_pool1d.default}

# Ops whose int8 kernel needs output quantization == input quantization: data movement,
# pooling, resizing. The first argument is the data input.
SHARED_SINGLE_INPUT = {
    aten.max_pool2d.default,
    aten.max_pool1d.default,
    aten.avg_pool2d.default,
    aten.avg_pool1d.default,
    # adaptive_avg_pool2d to a size other than 1x1 (an average pool): see annotators.
    aten.adaptive_avg_pool2d.default,
    aten.adaptive_avg_pool1d.default,
    aten.view.default,
    aten.reshape.default,
    aten.flatten.using_ints,
    aten.unflatten.int,
    aten.permute.default,
    aten.transpose.int,
    aten.slice.Tensor,
    aten.select.int,
    aten.pad.default,
    aten.constant_pad_nd.default,
    aten.upsample_nearest2d.vec,
    aten.upsample_nearest2d.default,
    aten.upsample_bilinear2d.vec,
    aten.upsample_bilinear2d.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.unsqueeze.default,
    # Identity in an eval-mode export (train=False), which is how a model is deployed.
    aten.dropout.default,
    aten.clone.default,
    aten.alias.default,
    aten.contiguous.default,
    # A clamp that no conv/linear/add/mul absorbs keeps its input's qparams: clamping
    # the int8 value then is exact, and the lowering runs it as a pool's act_min/max.
    *FUSABLE_ACTIVATIONS,
}
# One input, several outputs (read through getitem nodes).
SHARED_SPLIT = {
    aten.split.Tensor,
    aten.split_with_sizes.default,
    aten.chunk.default,
    aten.unbind.int,
}
CONCAT = {aten.cat.default, aten.concat.default}

GETITEM = operator.getitem

# Ops that mean the model was exported in training mode (a PTQ config rejects them).
TRAINING_ONLY = {
    aten.dropout.default: ("train", 2),
    aten.batch_norm.default: ("training", 5),
    aten._native_batch_norm_legit.default: ("training", 5),
}
