// XTS3: the serialized graph format that the AOT lowering writes and the
// device runtime executes. This header is the single source of truth for
// every constant of the format: the parser and interpreter include it, and
// the Python side reads the same values through the host binding
// (executorch_espnn._native). docs/xts3-format.md describes the byte layout.
//
// Everything in a blob is little-endian. All multi-byte records are read
// with explicit byte loads, so the parser never performs an unaligned load.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace espnn {
namespace xts3 {

// ---------------------------------------------------------------- header
constexpr uint32_t kMagic = 0x33535458u;  // bytes 'X' 'T' 'S' '3'
// Version written by this runtime. A blob of another version is refused:
// opcodes and parameter layouts are defined per version below.
constexpr uint16_t kFormatVersion = 5;
constexpr uint16_t kMinFormatVersion = 1;

constexpr uint32_t kHeaderSize = 32;
// Header field byte offsets.
constexpr uint32_t kHdrMagic = 0;           // u32
constexpr uint32_t kHdrVersion = 4;         // u16
constexpr uint32_t kHdrHeaderSize = 6;      // u16, must equal kHeaderSize
constexpr uint32_t kHdrBlobSize = 8;        // u32, total bytes of the blob
constexpr uint32_t kHdrFlags = 12;          // u32, must be 0 in version 1
constexpr uint32_t kHdrArenaSize = 16;      // u32, bytes of the activation arena
constexpr uint32_t kHdrSectionCount = 20;   // u32
constexpr uint32_t kHdrSectionTable = 24;   // u32, byte offset of the section table
constexpr uint32_t kHdrReserved = 28;       // u32, must be 0

// ---------------------------------------------------------------- sections
// A section table entry: u32 kind, u32 offset, u32 size (bytes), u32 count.
constexpr uint32_t kSectionEntrySize = 16;

#define ESPNN_XTS3_SECTIONS(X)                                                \
  /* name,       id, record size (0 = raw bytes) */                           \
  X(TENSORS,      1, 40)                                                      \
  X(OPS,          2, 20)                                                      \
  X(OP_IO,        3, 2) /* u16 tensor indices referenced by op records */     \
  X(PARAMS,       4, 4) /* i32 parameter words referenced by op records */    \
  X(CONSTANTS,    5, 0) /* raw constant bytes, 16-byte aligned in the blob */ \
  X(INPUTS,       6, 2) /* u16 tensor indices of the graph inputs */          \
  X(OUTPUTS,      7, 2) /* u16 tensor indices of the graph outputs */

enum class Section : uint32_t {
#define ESPNN_X(name, id, rec) name = id,
  ESPNN_XTS3_SECTIONS(ESPNN_X)
#undef ESPNN_X
};
constexpr uint32_t kNumSectionKinds = 7;

// ---------------------------------------------------------------- tensors
// Tensor record (40 bytes):
//   0 u8 dtype  1 u8 rank  2 u8 memory  3 u8 flags (kTensorFlag*; 0 in version 1)
//   4 u32 offset (arena offset, or offset inside the CONSTANTS section)
//   8 u32 nbytes  12 i32 zero_point  16 f32 scale  20 u32 dims[5]
constexpr uint32_t kTensorRecordSize = 40;
constexpr uint32_t kTenDtype = 0, kTenRank = 1, kTenMemory = 2, kTenFlags = 3,
                   kTenOffset = 4, kTenNbytes = 8, kTenZeroPoint = 12,
                   kTenScale = 16, kTenDims = 20;

// Tensor flags (version >= 2; every other bit must be 0).
// BANDED: an int8 rank-4 [1,H,W,C] arena tensor written inside a fused
// region (BAND_LOOP) that exists only as a band buffer of `nbytes` =
// capacity rows x W x C bytes at its arena offset (1 <= capacity <= H). The
// parser computes the rows every band needs and checks the capacity; no op
// outside its region may read it, and it is never a graph input or output.
constexpr uint8_t kTensorFlagBanded = 0x01;
// EXTERNAL: a FLOAT32 tensor whose bytes the caller provides instead of the
// arena. It takes no arena space: its offset must be 0, it is in no arena
// range check (so it aliases nothing), and it is never BANDED. It is either
//   * a graph input, never written by an op (Interpreter::BindInput: read
//     in place), or
//   * from version kExternalOutputMinVersion, a graph output written by
//     exactly one op and listed once among the outputs, never also a graph
//     input (Interpreter::BindOutput: the op writes the caller's buffer, so
//     a large float result costs no arena bytes and no copy).
constexpr uint8_t kTensorFlagExternal = 0x02;
constexpr uint8_t kTensorFlagsKnown = kTensorFlagBanded | kTensorFlagExternal;
constexpr uint16_t kTensorFlagMinVersion = 2;  // the first version with tensor flags
constexpr uint16_t kExternalOutputMinVersion = 5;  // the first with EXTERNAL graph outputs

#define ESPNN_XTS3_DTYPES(X) \
  /* name,  id, element bytes */ \
  X(INT8,    1, 1)               \
  X(INT32,   2, 4)               \
  X(FLOAT32, 3, 4)

enum class DType : uint8_t {
#define ESPNN_X(name, id, size) name = id,
  ESPNN_XTS3_DTYPES(ESPNN_X)
#undef ESPNN_X
};

#define ESPNN_XTS3_MEMORY_KINDS(X) \
  X(ARENA,    1) /* activation: lives in the arena at `offset` */ \
  X(CONSTANT, 2) /* constant: lives in the CONSTANTS section at `offset` */

enum class Memory : uint8_t {
#define ESPNN_X(name, id) name = id,
  ESPNN_XTS3_MEMORY_KINDS(ESPNN_X)
#undef ESPNN_X
};

// ---------------------------------------------------------------- ops
// Op record (20 bytes):
//   0 u16 opcode  2 u8 n_inputs  3 u8 n_outputs
//   4 u32 io_start      first entry in OP_IO (inputs, then outputs)
//   8 u32 params_start  first word in PARAMS
//  12 u32 params_count  number of i32 words, must equal the opcode's field count
//  16 u32 debug_handle  opaque, reported in profiling events and errors
constexpr uint32_t kOpRecordSize = 20;
constexpr uint32_t kOpOpcode = 0, kOpNumInputs = 2, kOpNumOutputs = 3,
                   kOpIoStart = 4, kOpParamsStart = 8, kOpParamsCount = 12,
                   kOpDebugHandle = 16;

// An optional op input (e.g. a conv without bias) is given this index.
constexpr uint16_t kNoTensor = 0xFFFFu;

// Opcodes. Columns: name, opcode, first format version that has it,
// min/max inputs, min/max outputs, bit mask of optional inputs.
// Input conventions are documented in docs/xts3-format.md.
#define ESPNN_XTS3_OPS(X)                                        \
  X(CONV2D,           1, 1, 5, 5, 1, 1, 0x4)                     \
  X(DEPTHWISE_CONV2D, 2, 1, 5, 5, 1, 1, 0x4)                     \
  X(FULLY_CONNECTED,  3, 1, 5, 5, 1, 1, 0x4)                     \
  X(ADD,              4, 1, 2, 2, 1, 1, 0x0)                     \
  X(MUL,              5, 1, 2, 2, 1, 1, 0x0)                     \
  X(AVG_POOL2D,       6, 1, 1, 1, 1, 1, 0x0)                     \
  X(MAX_POOL2D,       7, 1, 1, 1, 1, 1, 0x0)                     \
  X(SOFTMAX,          8, 1, 1, 1, 1, 1, 0x0)                     \
  X(MEAN_HW,          9, 1, 1, 1, 1, 1, 0x0)                     \
  X(HARD_SWISH,      10, 1, 1, 1, 1, 1, 0x0)                     \
  X(LUT,             11, 1, 2, 2, 1, 1, 0x0)                     \
  X(TRANSPOSE_CONV2D,12, 1, 5, 5, 1, 1, 0x4)                     \
  X(RESIZE_NEAREST,  13, 1, 3, 3, 1, 1, 0x0)                     \
  X(RESIZE_BILINEAR, 14, 1, 3, 3, 1, 1, 0x0)                     \
  X(RESHAPE,         15, 1, 1, 1, 1, 1, 0x0)                     \
  X(TRANSPOSE,       16, 1, 1, 1, 1, 1, 0x0)                     \
  X(SLICE,           17, 1, 1, 1, 1, 1, 0x0)                     \
  X(PAD,             18, 1, 1, 1, 1, 1, 0x0)                     \
  X(CONCAT,          19, 1, 1, 16, 1, 1, 0x0)                    \
  X(SPLIT,           20, 1, 1, 1, 1, 16, 0x0)                    \
  X(QUANTIZE,        21, 1, 1, 1, 1, 1, 0x0)                     \
  X(DEQUANTIZE,      22, 1, 1, 1, 1, 1, 0x0)                     \
  X(REQUANTIZE,      23, 1, 1, 1, 1, 1, 0x0)                     \
  X(BATCH_MATMUL,    24, 2, 2, 2, 1, 1, 0x0)                     \
  X(LAYER_NORM,      25, 2, 4, 4, 1, 1, 0x8)                     \
  X(BAND_LOOP,       26, 2, 0, 0, 0, 1, 0x0)                     \
  X(CHANNEL_LUT,     27, 2, 2, 2, 1, 1, 0x0)                     \
  X(MASKED_SOFTMAX,  28, 3, 2, 2, 1, 1, 0x0)                     \
  X(GRU,             29, 3, 11, 11, 1, 1, 0x0)                   \
  X(LSTM,            30, 3, 11, 11, 1, 1, 0x0)

enum class Opcode : uint16_t {
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) name = code,
  ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
};

// How an op's output may share arena bytes with one of its inputs. The
// parser's arena-plan check enforces it (parser.cpp, CheckArenaPlan;
// docs/xts3-format.md "Arena plan"):
//   VIEW      the output may occupy exactly the bytes of its input, which
//             may stay live (both name the same bytes; nothing is copied);
//   IN_PLACE  the output may occupy exactly the bytes of an input that no
//             later op reads and that is not a graph output. The kernel
//             reads element i of every input before it writes element i of
//             the output, and an input of the output's size is indexed like
//             the output, so the exact overlap is safe (a partial one never
//             is).
// Every other op's output must be disjoint from all of its inputs.
#define ESPNN_XTS3_ALIASING(X) \
  X(RESHAPE, VIEW)             \
  X(ADD, IN_PLACE)             \
  X(MUL, IN_PLACE)             \
  X(HARD_SWISH, IN_PLACE)      \
  X(LUT, IN_PLACE)             \
  X(REQUANTIZE, IN_PLACE)      \
  X(CHANNEL_LUT, IN_PLACE)

enum class Aliasing : uint8_t { NONE = 0, VIEW = 1, IN_PLACE = 2 };

constexpr Aliasing OpAliasing(Opcode op) {
#define ESPNN_X(name, mode) \
  if (op == Opcode::name) return Aliasing::mode;
  ESPNN_XTS3_ALIASING(ESPNN_X)
#undef ESPNN_X
  return Aliasing::NONE;
}

// ---------------------------------------------------------------- params
// Each opcode's parameters are a fixed list of i32 words, named here once.
// Fields ending in `_f32` hold the bit pattern of an IEEE-754 float32.
// Offsets follow ESP-NN's convention: input offsets are -zero_point, output
// offsets are +zero_point. Shifts are signed exponents (positive = left)
// except where the field name says otherwise. act_min/act_max are int8
// clamps applied after the output offset.
#define ESPNN_XTS3_PARAMS_CONV2D(F)                                     \
  F(stride_h) F(stride_w) F(pad_top) F(pad_left) F(dilation_h)          \
  F(dilation_w) F(groups) F(input_offset) F(output_offset) F(act_min)   \
  F(act_max)
#define ESPNN_XTS3_PARAMS_DEPTHWISE_CONV2D(F)                           \
  F(stride_h) F(stride_w) F(pad_top) F(pad_left) F(dilation_h)          \
  F(dilation_w) F(ch_mult) F(input_offset) F(output_offset) F(act_min)  \
  F(act_max)
#define ESPNN_XTS3_PARAMS_FULLY_CONNECTED(F) \
  F(input_offset) F(filter_offset) F(output_offset) F(act_min) F(act_max)
// ADD: ESP-NN/TFLite add; the three *_shift fields are <= 0, left_shift is a
// separate positive pre-shift (20 for int8).
#define ESPNN_XTS3_PARAMS_ADD(F)                                              \
  F(input1_offset) F(input2_offset) F(input1_mult) F(input1_shift)            \
  F(input2_mult) F(input2_shift) F(left_shift) F(output_offset)               \
  F(output_mult) F(output_shift) F(act_min) F(act_max)
#define ESPNN_XTS3_PARAMS_MUL(F)                                    \
  F(input1_offset) F(input2_offset) F(output_offset) F(output_mult) \
  F(output_shift) F(act_min) F(act_max)
#define ESPNN_XTS3_PARAMS_AVG_POOL2D(F)                                   \
  F(kernel_h) F(kernel_w) F(stride_h) F(stride_w) F(pad_top) F(pad_left)  \
  F(act_min) F(act_max)
#define ESPNN_XTS3_PARAMS_MAX_POOL2D(F) ESPNN_XTS3_PARAMS_AVG_POOL2D(F)
// SOFTMAX over the last dimension; input_left_shift >= 0 (TFLite's
// input_left_shift), diff_min <= 0. Output is fixed at scale 1/256, zp -128.
#define ESPNN_XTS3_PARAMS_SOFTMAX(F) \
  F(input_mult) F(input_left_shift) F(diff_min)
// The output quantization SOFTMAX and MASKED_SOFTMAX require of their
// output tensor record.
constexpr int32_t kSoftmaxOutZeroPoint = -128;
constexpr float kSoftmaxOutScale = 1.0f / 256.0f;
// MASKED_SOFTMAX: SOFTMAX over the positions its constant 0/1 mask allows
// (input 1, [mask rows, width]; row r of the input uses mask row r % mask
// rows); masked positions and fully masked rows give probability 0 (-128).
#define ESPNN_XTS3_PARAMS_MASKED_SOFTMAX(F) ESPNN_XTS3_PARAMS_SOFTMAX(F)
// MEAN_HW: raw zero points (not negated); 1/(H*W) folded into mult/shift.
#define ESPNN_XTS3_PARAMS_MEAN_HW(F) \
  F(input_zero_point) F(output_zero_point) F(mult) F(shift)
// HARD_SWISH: raw zero points; Q15 multipliers as in TFLite's HardSwish.
#define ESPNN_XTS3_PARAMS_HARD_SWISH(F)                                   \
  F(input_zero_point) F(output_zero_point) F(output_mult_fxp)             \
  F(reluish_mult_fxp) F(reluish_mult_exp) F(output_mult_exp)
#define ESPNN_XTS3_PARAMS_LUT(F)
#define ESPNN_XTS3_PARAMS_TRANSPOSE_CONV2D(F) ESPNN_XTS3_PARAMS_CONV2D(F)
#define ESPNN_XTS3_PARAMS_RESIZE_NEAREST(F)
#define ESPNN_XTS3_PARAMS_RESIZE_BILINEAR(F)
#define ESPNN_XTS3_PARAMS_RESHAPE(F)
#define ESPNN_XTS3_PARAMS_TRANSPOSE(F) F(perm0) F(perm1) F(perm2) F(perm3) F(perm4)
#define ESPNN_XTS3_PARAMS_SLICE(F)                                       \
  F(begin0) F(begin1) F(begin2) F(begin3) F(begin4) F(step0) F(step1)    \
  F(step2) F(step3) F(step4)
#define ESPNN_XTS3_PARAMS_PAD(F)                                          \
  F(before0) F(before1) F(before2) F(before3) F(before4) F(pad_value)
#define ESPNN_XTS3_PARAMS_CONCAT(F) F(axis)
#define ESPNN_XTS3_PARAMS_SPLIT(F) F(axis)
// QUANTIZE float32 -> int8: q = clamp(nearbyint(x * inv_scale) + zero_point)
// with inv_scale = float32(1 / scale), as PyTorch and ExecuTorch compute it.
// channels_last (version 4; 0 or 1): 1 = the input is [N, C, spatial...]
// (rank 3..5) and the output holds it with dim 1 moved last, [N, spatial...,
// C]: a float NCHW graph input quantized straight into ESP-NN's NHWC, with
// no int8 NCHW copy and no TRANSPOSE next to it in the arena.
#define ESPNN_XTS3_PARAMS_QUANTIZE(F) F(inv_scale_f32) F(zero_point) F(channels_last)
// DEQUANTIZE int8 -> float32: x = (q - zero_point) * scale, in float32.
// channels_last (version 5; 0 or 1): 1 = the input is [N, spatial..., C]
// (rank 3..5) and the output holds it with the last dim moved to 1, [N, C,
// spatial...]: QUANTIZE's channels_last mirrored, so ESP-NN's NHWC result
// becomes the NCHW float graph output with no TRANSPOSE and no int8 NCHW
// copy next to it in the arena.
#define ESPNN_XTS3_PARAMS_DEQUANTIZE(F) F(scale_f32) F(zero_point) F(channels_last)
// REQUANTIZE int8 -> int8: y = clamp(MBQM(x - in_zp, mult, shift) + out_zp).
#define ESPNN_XTS3_PARAMS_REQUANTIZE(F) \
  F(input_zero_point) F(output_zero_point) F(mult) F(shift)
// LAYER_NORM int8 -> int8 over the last dim (layer norm, or RMS norm when
// rms_norm = 1); zero points come from the tensor records. eps_lo/eps_hi are
// the low and high words of the unsigned 64-bit eps term (eps * N^2 /
// input_scale^2 in Q kNormEpsFracBits); docs/xts3-format.md has the formula.
#define ESPNN_XTS3_PARAMS_LAYER_NORM(F) \
  F(rms_norm) F(eps_lo) F(eps_hi) F(act_min) F(act_max)

// BATCH_MATMUL int8 x int8 -> int8, one per-tensor requantization:
// out[.., m, n] = clamp(MBQM(sum_k (lhs[.., m, k] + lhs_offset) *
//                                  (rhs[.., k, n] + rhs_offset), mult, shift)
//                       + output_offset, act_min, act_max).
// rhs_transposed = 1: the rhs tensor holds [.., N, K] (rows are ESP-NN's FC
// filter rows, as `k` of q @ k^T already is); 0: it holds [.., K, N].
#define ESPNN_XTS3_PARAMS_BATCH_MATMUL(F)                                \
  F(lhs_offset) F(rhs_offset) F(output_offset) F(mult) F(shift)          \
  F(act_min) F(act_max) F(rhs_transposed)
// GRU and LSTM: one layer of nn.GRU / nn.LSTM (unidirectional, zero initial
// state) over a whole int8 sequence, input [B, T, I] (batch_first = 1) or
// [T, B, I] (0), output the int8 hidden sequence [B, T, H] / [T, B, H].
// Inputs: the sequence; w_ih int8 [G*H, I] and w_hh int8 [G*H, H] (PyTorch's
// gate order: r, z, n for GRU, G = 3; i, f, g, o for LSTM, G = 4); bias_ih,
// bias_hh int32 [G*H] (in units of the product of the two scales);
// mult_ih/shift_ih and mult_hh/shift_hh int32 [G*H], per gate row, to the
// Q3.12 gate pre-activations; the sigmoid and tanh tables int32
// [kRecurrentTableEntries] (Q0.15 outputs at Q3.12 inputs -8, -8 + 1/16, ...,
// 8). The state is int16 (h Q0.15; LSTM's cell Q4.11); state_mult/shift
// requantize h to the output's int8 (which is also what w_hh reads at the
// next step). docs/xts3-format.md, GRU and LSTM, has every formula.
#define ESPNN_XTS3_PARAMS_GRU(F) F(batch_first) F(state_mult) F(state_shift)
#define ESPNN_XTS3_PARAMS_LSTM(F) ESPNN_XTS3_PARAMS_GRU(F)
// CHANNEL_LUT: one LUT per index of dimension `axis` (a per-channel function
// such as prelu with one slope per channel); the table is [dims[axis], 256].
#define ESPNN_XTS3_PARAMS_CHANNEL_LUT(F) F(axis)

// BAND_LOOP: the `num_ops` op records after it form a fused region, run
// band by band: each iteration computes `band_rows` more output rows of the
// region's last op (fewer in the last band), and every op in the region
// computes only the rows that band needs and no earlier band computed (its
// BANDED output keeps the rows later bands still read). `flags`
// (kBandFlag*): IN_PLACE = the region's output occupies the bytes of its
// input (input 0 of the region's first op) from their start (its shape, or
// its rows each no wider) and each output row is staged in the BAND_LOOP's one output tensor (int8 [rows, W*C])
// until no later band reads that input row. docs/xts3-format.md section 6, BAND_LOOP.
#define ESPNN_XTS3_PARAMS_BAND_LOOP(F) F(num_ops) F(band_rows) F(flags)

// One C struct per opcode with the fields above, in order, all int32_t.
// The parser fills them from the PARAMS section (see LoadParams in model.h).
#define ESPNN_PARAM_FIELD(name) int32_t name;
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt)           \
  struct name##_Params {                                                \
    ESPNN_XTS3_PARAMS_##name(ESPNN_PARAM_FIELD)                         \
  };
ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
#undef ESPNN_PARAM_FIELD

// Number of parameter words per opcode.
#define ESPNN_PARAM_COUNT(name) +1
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) \
  constexpr uint32_t kNumParams_##name = 0 ESPNN_XTS3_PARAMS_##name(ESPNN_PARAM_COUNT);
ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
#undef ESPNN_PARAM_COUNT

// Parameter fields appended to an opcode's list after its first version, in
// version order: a blob older than `version` carries only the opcode's first
// `fields_before` words (the parser checks that count for it), and
// OpInfo::Params reads the fields after them as 0, which is what the opcode
// did before the field existed. Old blobs keep loading unchanged, and the
// writer writes the newer version only for an op that sets such a field.
#define ESPNN_XTS3_PARAM_APPENDS(X) \
  /* opcode,  version, fields_before */ \
  X(QUANTIZE, 4, 2) \
  X(DEQUANTIZE, 5, 2)

// Parameter words an op of `op` has in a blob of `version`.
constexpr uint32_t NumParamsInVersion(Opcode op, uint16_t version) {
#define ESPNN_X(name, ver, before) \
  if (op == Opcode::name && version < ver) return before;
  ESPNN_XTS3_PARAM_APPENDS(ESPNN_X)
#undef ESPNN_X
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) \
  if (op == Opcode::name) return kNumParams_##name;
  ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
  return 0;
}

// BAND_LOOP flags (every other bit must be 0).
constexpr int32_t kBandFlagInPlace = 0x1;
constexpr int32_t kBandFlagsKnown = kBandFlagInPlace;

// ---------------------------------------------------------------- limits
constexpr uint32_t kMaxRank = 5;
constexpr uint32_t kMaxTensors = 4096;  // tensor indices must stay below kNoTensor
constexpr uint32_t kMaxOps = 2048;
constexpr uint32_t kMaxGraphInputs = 16;
constexpr uint32_t kMaxGraphOutputs = 16;
constexpr uint32_t kMaxOpInputs = 16;
constexpr uint32_t kMaxOpOutputs = 16;
// Every dimension of every tensor. ESP-NN narrows conv, pool and FC geometry
// to uint16_t, so those ops check the tighter kMaxKernelDim themselves.
constexpr uint32_t kMaxDim = 1u << 24;
constexpr uint32_t kMaxKernelDim = 65535u;
// A tensor, the arena and the blob are at most 2 GiB - 1 so that every size
// and offset fits int32 on the 32-bit target as well.
constexpr uint32_t kMaxTensorBytes = 0x7FFFFFFFu;
constexpr uint32_t kMaxArenaBytes = 0x7FFFFFFFu;
constexpr uint32_t kMaxBlobBytes = 0x7FFFFFFFu;
// Alignment of the CONSTANTS section in the blob, of the blob in memory, of
// arena tensor offsets and of the arena/scratch buffers.
constexpr uint32_t kConstantAlignment = 16;
constexpr uint32_t kArenaAlignment = 16;
constexpr uint32_t kBlobAlignment = 16;
// Longest SOFTMAX row. TFLite's int8 softmax (and so ESP-NN's) shifts its
// Q12 sum of exponentials right by more than 31 bits once the sum reaches
// 512, which C leaves undefined (ESP-NN 1.2.3 then outputs 127 everywhere);
// only rows of 512 or more elements can get there.
constexpr uint32_t kMaxSoftmaxWidth = 511;
// Entries of a LUT op's table (indexed by the uint8 view of the int8 input).
constexpr uint32_t kLutEntries = 256;
// RESIZE_BILINEAR fractional weights are Q10 (0..1024).
constexpr uint32_t kBilinearFracBits = 10;
// LAYER_NORM's integer arithmetic (docs/xts3-format.md, LAYER_NORM).
// Longest normalised row (last dim): with |x - zp| <= 255 the sum of squares
// of a row stays below 2^32 (255^2 * 65535 < 2^32), N * sum of squares below
// 2^48, and the normalised value |z| <= sqrt(N) below 256.
constexpr uint32_t kMaxNormWidth = 65535;
// Fraction bits of the eps term added to the integer variance (Q14): the
// variance N*S2 - S1^2 < 2^48 shifted by 14 and the eps term (< 2^62) add up
// below 2^63.
constexpr uint32_t kNormEpsFracBits = 14;
// Fraction bits of the normalised value z = (x - mean) / std inside the
// kernel (Q22: |z| < 2^8 gives |z| * 2^22 < 2^30).
constexpr uint32_t kNormValueFracBits = 22;
// Fraction bits of beta, in output units (Q16), and of the sum it joins.
constexpr uint32_t kNormBetaFracBits = 16;
// gamma_shift range: G = gamma_mult * 2^(gamma_shift - 31).
constexpr int32_t kNormMinGammaShift = -24;
constexpr int32_t kNormMaxGammaShift = 30;

// GRU/LSTM fixed-point formats (docs/xts3-format.md, GRU and LSTM): gate
// pre-activations Q3.12 (int16, saturated at +-8), gate values and the hidden
// state Q0.15, LSTM's cell Q4.11 (int16, saturated at +-16). The sigmoid and
// tanh tables sample Q3.12 every 2^kRecurrentTableStepBits and are
// interpolated linearly in between.
constexpr uint32_t kRecurrentGateFracBits = 12;
constexpr uint32_t kRecurrentStateFracBits = 15;
constexpr uint32_t kRecurrentCellFracBits = 11;
constexpr uint32_t kRecurrentTableStepBits = 8;
constexpr uint32_t kRecurrentTableEntries = (1u << (16 - kRecurrentTableStepBits)) + 1;  // 257

// Fused regions: at most this many ops, and this many distinct arena
// tensors read or written by them (the runtime keeps per-band state for each
// on the stack, so both bounds are small and fixed).
constexpr uint32_t kMaxRegionOps = 32;
constexpr uint32_t kMaxRegionTensors = 64;

}  // namespace xts3
}  // namespace espnn
