// The ops of the operator-library mode (docs/oplib.md): each an ExecuTorch
// custom op `espnn::<name>` whose kernel runs one XTS3 opcode through
// RunSingleOp (espnn/single_op.h).
//
// X(name, opcode, activations, zero_points): the op's arguments are the
// opcode's inputs in XTS3 order (Tensor, or None for an absent optional one),
// then its parameter words by their xts3_format.h names (int; float for
// *_f32), then, when `zero_points` is 1, `int input_zero_point, int
// output_zero_point` (the zero points of input 0 and of the output, for an
// opcode that reads them from its tensors' records rather than from a
// parameter word: GRU and LSTM), then, for an opcode whose kernel sizes a
// scratch buffer (OpcodeHasScratch), `Tensor? scratch` (ExecuTorch plans it,
// SingleOpScratchBytes sizes it; None when the call needs none), then `out`.
// The first `activations` inputs are activations, the others constants
// (weights, bias, multipliers). python/executorch_espnn/oplib/operators.yaml
// holds the schemas; a test checks the two agree.
#pragma once

#define ESPNN_OPLIB_OPS(X)                              \
  X(quantized_conv2d, CONV2D, 1, 0)                     \
  X(quantized_depthwise_conv2d, DEPTHWISE_CONV2D, 1, 0) \
  X(quantized_linear, FULLY_CONNECTED, 1, 0)            \
  X(quantized_add, ADD, 2, 0)                           \
  X(quantized_avg_pool2d, AVG_POOL2D, 1, 0)             \
  X(quantized_max_pool2d, MAX_POOL2D, 1, 0)             \
  X(quantized_transpose_conv2d, TRANSPOSE_CONV2D, 1, 0) \
  X(quantized_batch_matmul, BATCH_MATMUL, 2, 0)         \
  X(quantized_mul, MUL, 2, 0)                           \
  X(quantized_softmax, SOFTMAX, 1, 0)                   \
  X(quantized_mean_hw, MEAN_HW, 1, 0)                   \
  X(quantized_hardswish, HARD_SWISH, 1, 0)              \
  X(quantized_lut, LUT, 1, 0)                           \
  X(requantize, REQUANTIZE, 1, 0)                       \
  X(quantize_per_tensor, QUANTIZE, 1, 0)                \
  X(dequantize_per_tensor, DEQUANTIZE, 1, 0)            \
  X(quantized_gru, GRU, 1, 1)                           \
  X(quantized_lstm, LSTM, 1, 1)
