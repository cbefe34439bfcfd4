// Maps each XTS3 opcode to its kernel. Kernels are defined in one file per
// op family in this directory.
#include "ops/op_kernel.h"

namespace espnn {

#define ESPNN_OP_KERNELS(X)                             \
  X(CONV2D, kConv2dKernel)                              \
  X(DEPTHWISE_CONV2D, kDepthwiseConv2dKernel)           \
  X(FULLY_CONNECTED, kFullyConnectedKernel)             \
  X(ADD, kAddKernel)                                    \
  X(MUL, kMulKernel)                                    \
  X(AVG_POOL2D, kAvgPool2dKernel)                       \
  X(MAX_POOL2D, kMaxPool2dKernel)                       \
  X(SOFTMAX, kSoftmaxKernel)                            \
  X(MEAN_HW, kMeanHwKernel)                             \
  X(HARD_SWISH, kHardSwishKernel)                       \
  X(LUT, kLutKernel)                                    \
  X(TRANSPOSE_CONV2D, kTransposeConv2dKernel)           \
  X(RESIZE_NEAREST, kResizeNearestKernel)               \
  X(RESIZE_BILINEAR, kResizeBilinearKernel)             \
  X(RESHAPE, kReshapeKernel)                            \
  X(TRANSPOSE, kTransposeKernel)                        \
  X(SLICE, kSliceKernel)                                \
  X(PAD, kPadKernel)                                    \
  X(CONCAT, kConcatKernel)                              \
  X(SPLIT, kSplitKernel)                                \
  X(QUANTIZE, kQuantizeKernel)                          \
  X(DEQUANTIZE, kDequantizeKernel)                      \
  X(REQUANTIZE, kRequantizeKernel)

#define ESPNN_X(op, kernel) extern const OpKernel kernel;
ESPNN_OP_KERNELS(ESPNN_X)
#undef ESPNN_X

const OpKernel* LookupOpKernel(xts3::Opcode opcode) {
  switch (opcode) {
#define ESPNN_X(op, kernel)  \
  case xts3::Opcode::op:     \
    return &kernel;
    ESPNN_OP_KERNELS(ESPNN_X)
#undef ESPNN_X
  }
  return nullptr;
}

}  // namespace espnn
