// Maps each XTS3 opcode to its kernel. Kernels are defined in one file per
// op family in this directory.
//
// Selective build: when ESPNN_OPS is defined (a string of op names, e.g.
// "CONV2D,DEPTHWISE_CONV2D,FULLY_CONNECTED"; Kconfig's ESPNN_SELECT_OPS or
// the host build's ESPNN_OPS set it), only the listed kernels are
// referenced. The others stay unreferenced, so the linker's garbage
// collection drops them from the application, and the parser refuses a
// model that uses one (see parser.cpp).
#include "ops/op_kernel.h"

namespace espnn {
namespace {

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
  X(REQUANTIZE, kRequantizeKernel)                      \
  X(BATCH_MATMUL, kBatchMatmulKernel)                   \
  X(LAYER_NORM, kLayerNormKernel)                       \
  X(BAND_LOOP, kBandLoopKernel)                         \
  X(CHANNEL_LUT, kChannelLutKernel)                     \
  X(MASKED_SOFTMAX, kMaskedSoftmaxKernel)               \
  X(GRU, kGruKernel)                                    \
  X(LSTM, kLstmKernel)

// One row above per opcode of the format, in the format's order: a row added
// to ESPNN_XTS3_OPS without its kernel here fails the build, instead of
// leaving a model with the op to be refused at parse time.
constexpr xts3::Opcode kRegisteredOps[] = {
#define ESPNN_X(op, kernel) xts3::Opcode::op,
    ESPNN_OP_KERNELS(ESPNN_X)
#undef ESPNN_X
};
constexpr xts3::Opcode kFormatOps[] = {
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) xts3::Opcode::name,
    ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
};

constexpr bool RegistryFollowsFormat() {
  if (sizeof(kRegisteredOps) != sizeof(kFormatOps)) return false;
  for (size_t i = 0; i < sizeof(kFormatOps) / sizeof(kFormatOps[0]); ++i) {
    if (kRegisteredOps[i] != kFormatOps[i]) return false;
  }
  return true;
}
static_assert(RegistryFollowsFormat(),
              "ESPNN_OP_KERNELS (op_registry.cpp) needs one row per opcode of ESPNN_XTS3_OPS (xts3_format.h), "
              "in the same order");

constexpr bool IsSeparator(char c) { return c == ',' || c == ' ' || c == ';'; }

// True when [word, end) spells `name`.
constexpr bool WordIs(const char* word, const char* end, const char* name) {
  while (word != end && *name != '\0' && *word == *name) {
    ++word;
    ++name;
  }
  return word == end && *name == '\0';
}

// True when `name` is one of the separated words of `list`; evaluated by the
// compiler, so a kernel that is not selected is never referenced.
constexpr bool ListHas(const char* list, const char* name) {
  for (const char* p = list; *p != '\0';) {
    while (IsSeparator(*p)) ++p;
    const char* word = p;
    while (*p != '\0' && !IsSeparator(*p)) ++p;
    if (word != p && WordIs(word, p, name)) return true;
  }
  return false;
}

// Every op of the format (xts3_format.h).
constexpr const char* kOpNames[] = {
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) #name,
    ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
};

// True when every word of `list` names an op, so that a misspelt selection
// fails the build instead of leaving an op out.
constexpr bool AllWordsAreOps(const char* list) {
  for (const char* p = list; *p != '\0';) {
    while (IsSeparator(*p)) ++p;
    const char* word = p;
    while (*p != '\0' && !IsSeparator(*p)) ++p;
    if (word == p) continue;
    bool known = false;
    for (const char* name : kOpNames) known = known || WordIs(word, p, name);
    if (!known) return false;
  }
  return true;
}

static_assert(ListHas("A,CONV2D", "CONV2D") && !ListHas("CONV2D_X", "CONV2D") && !ListHas("CONV", "CONV2D") &&
                  ListHas(" ADD ;MUL", "MUL") && !ListHas("", "ADD") && AllWordsAreOps("ADD, MUL") &&
                  !AllWordsAreOps("ADD,MULL"),
              "op list matching");

#ifdef ESPNN_OPS
constexpr const char* kSelectedOps = ESPNN_OPS;
static_assert(AllWordsAreOps(kSelectedOps), "ESPNN_OPS names an op the runtime does not have (see xts3_format.h)");
constexpr bool Selected(const char* name) { return ListHas(kSelectedOps, name); }
#else
constexpr bool Selected(const char*) { return true; }
#endif

}  // namespace

#define ESPNN_X(op, kernel) extern const OpKernel kernel;
ESPNN_OP_KERNELS(ESPNN_X)
#undef ESPNN_X

const OpKernel* LookupOpKernel(xts3::Opcode opcode) {
  switch (opcode) {
#define ESPNN_X(op, kernel)                         \
  case xts3::Opcode::op:                            \
    if constexpr (Selected(#op)) return &kernel;    \
    return nullptr;
    ESPNN_OP_KERNELS(ESPNN_X)
#undef ESPNN_X
  }
  return nullptr;
}

}  // namespace espnn
