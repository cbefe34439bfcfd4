// XTS3 parser: validates a blob completely before anything runs on it.
//
// All arithmetic on sizes, offsets and counts is done in uint32_t with
// explicit "fits before it is computed" checks (or in uint64_t where a
// product of at most two uint32_t values is formed), so the checks are the
// same on the 32-bit target as on a 64-bit host. size_t is never used for
// blob-controlled quantities.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "espnn/byte_reader.h"
#include "espnn/model.h"
#include "ops/band_loop.h"
#include "ops/op_kernel.h"

namespace espnn {
namespace {

using bytes::LoadF32;
using bytes::LoadU16;
using bytes::LoadU32;
using bytes::RangeOk;

using namespace xts3;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "XTS3 params are copied as little-endian words");

struct SectionDesc {
  uint32_t id;
  uint32_t record_size;
  const char* name;
};
constexpr SectionDesc kSections[] = {
#define ESPNN_X(name, id, rec) {id, rec, #name},
    ESPNN_XTS3_SECTIONS(ESPNN_X)
#undef ESPNN_X
};
static_assert(sizeof(kSections) / sizeof(kSections[0]) == kNumSectionKinds,
              "section list and kNumSectionKinds disagree");
// The parser indexes kSections[kind - 1] once 1 <= kind <= kNumSectionKinds.
constexpr bool SectionIdsAreConsecutive() {
  for (uint32_t i = 0; i < kNumSectionKinds; ++i)
    if (kSections[i].id != i + 1) return false;
  return true;
}
static_assert(SectionIdsAreConsecutive(), "section ids must be 1..kNumSectionKinds in order");

struct OpDesc {
  uint16_t code;
  uint16_t min_version;
  uint8_t min_inputs, max_inputs, min_outputs, max_outputs;
  uint32_t optional_inputs;
  const char* name;
};
constexpr OpDesc kOps[] = {
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) \
  {code, ver, imin, imax, omin, omax, opt, #name},
    ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
};

const OpDesc* FindOp(uint16_t code) {
  for (const OpDesc& d : kOps)
    if (d.code == code) return &d;
  return nullptr;
}

Status ParseHeaderAndSections(const uint8_t* p, uint32_t size, uint16_t* version,
                              uint32_t* arena_size, uint32_t sec_offset[],
                              uint32_t sec_bytes[], uint32_t sec_count[]) {
  if (size < kHeaderSize)
    return Status::Error(StatusCode::kInvalidBlob,
                         "blob is %u bytes, smaller than the %u-byte header",
                         (unsigned)size, (unsigned)kHeaderSize);
  if (LoadU32(p + kHdrMagic) != kMagic)
    return Status::Error(StatusCode::kInvalidBlob,
                         "header: bad magic 0x%08x (expected 'XTS3')",
                         (unsigned)LoadU32(p + kHdrMagic));
  *version = LoadU16(p + kHdrVersion);
  if (*version < kMinFormatVersion || *version > kFormatVersion)
    return Status::Error(StatusCode::kUnsupportedVersion,
                         "header: format version %u is not supported (this runtime reads %u..%u)",
                         (unsigned)*version, (unsigned)kMinFormatVersion,
                         (unsigned)kFormatVersion);
  if (LoadU16(p + kHdrHeaderSize) != kHeaderSize)
    return Status::Error(StatusCode::kInvalidBlob, "header: header_size is %u, expected %u",
                         (unsigned)LoadU16(p + kHdrHeaderSize), (unsigned)kHeaderSize);
  uint32_t blob_size = LoadU32(p + kHdrBlobSize);
  if (blob_size > kMaxBlobBytes || blob_size < kHeaderSize)
    return Status::Error(StatusCode::kInvalidBlob, "header: blob_size %u is out of range",
                         (unsigned)blob_size);
  if (blob_size > size)
    return Status::Error(StatusCode::kInvalidBlob,
                         "header: blob_size %u exceeds the %u bytes given (truncated blob)",
                         (unsigned)blob_size, (unsigned)size);
  if (LoadU32(p + kHdrFlags) != 0)
    return Status::Error(StatusCode::kInvalidBlob, "header: flags 0x%x are not defined in version %u",
                         (unsigned)LoadU32(p + kHdrFlags), (unsigned)*version);
  if (LoadU32(p + kHdrReserved) != 0)
    return Status::Error(StatusCode::kInvalidBlob, "header: reserved field is not 0");
  *arena_size = LoadU32(p + kHdrArenaSize);
  if (*arena_size > kMaxArenaBytes || *arena_size % kArenaAlignment != 0)
    return Status::Error(StatusCode::kInvalidBlob,
                         "header: arena_size %u must be a multiple of %u and at most %u",
                         (unsigned)*arena_size, (unsigned)kArenaAlignment,
                         (unsigned)kMaxArenaBytes);

  uint32_t nsec = LoadU32(p + kHdrSectionCount);
  uint32_t table = LoadU32(p + kHdrSectionTable);
  if (nsec != kNumSectionKinds)
    return Status::Error(StatusCode::kInvalidBlob,
                         "header: section_count is %u, version %u has exactly %u sections",
                         (unsigned)nsec, (unsigned)*version, (unsigned)kNumSectionKinds);
  if (table < kHeaderSize || table % 4 != 0 ||
      !RangeOk(table, nsec * kSectionEntrySize, blob_size))
    return Status::Error(StatusCode::kInvalidBlob,
                         "header: section table at offset %u (%u entries) does not fit the %u-byte blob",
                         (unsigned)table, (unsigned)nsec, (unsigned)blob_size);
  const uint32_t table_end = table + nsec * kSectionEntrySize;

  bool seen[kNumSectionKinds] = {};
  for (uint32_t i = 0; i < nsec; ++i) {
    const uint8_t* e = p + table + i * kSectionEntrySize;
    uint32_t kind = LoadU32(e), off = LoadU32(e + 4), bytes = LoadU32(e + 8),
             count = LoadU32(e + 12);
    if (kind < 1 || kind > kNumSectionKinds)
      return Status::Error(StatusCode::kInvalidBlob, "section table entry %u: unknown section kind %u",
                           (unsigned)i, (unsigned)kind);
    const SectionDesc& d = kSections[kind - 1];
    if (seen[kind - 1])
      return Status::Error(StatusCode::kInvalidBlob, "section %s appears twice", d.name);
    seen[kind - 1] = true;
    uint32_t align = (Section)kind == Section::CONSTANTS ? kConstantAlignment : 4u;
    if (off % align != 0)
      return Status::Error(StatusCode::kInvalidBlob,
                           "section %s: offset %u is not %u-byte aligned", d.name,
                           (unsigned)off, (unsigned)align);
    if (!RangeOk(off, bytes, blob_size))
      return Status::Error(StatusCode::kInvalidBlob,
                           "section %s: bytes [%u, +%u) exceed the %u-byte blob", d.name,
                           (unsigned)off, (unsigned)bytes, (unsigned)blob_size);
    if (bytes != 0 && off < table_end)
      return Status::Error(StatusCode::kInvalidBlob,
                           "section %s: offset %u overlaps the header or section table", d.name,
                           (unsigned)off);
    if (d.record_size != 0) {
      // count * record_size must equal bytes; compare by division so a count
      // that would wrap 32-bit arithmetic cannot pass.
      if (bytes % d.record_size != 0 || count != bytes / d.record_size)
        return Status::Error(StatusCode::kInvalidBlob,
                             "section %s: count %u does not match %u bytes of %u-byte records",
                             d.name, (unsigned)count, (unsigned)bytes, (unsigned)d.record_size);
    } else if (count != 0) {
      return Status::Error(StatusCode::kInvalidBlob, "section %s: count must be 0, got %u",
                           d.name, (unsigned)count);
    }
    sec_offset[kind - 1] = off;
    sec_bytes[kind - 1] = bytes;
    sec_count[kind - 1] = count;
  }
  // Sections must not overlap one another.
  for (uint32_t a = 0; a < kNumSectionKinds; ++a)
    for (uint32_t b = a + 1; b < kNumSectionKinds; ++b) {
      if (sec_bytes[a] == 0 || sec_bytes[b] == 0) continue;
      if (sec_offset[a] < sec_offset[b] + sec_bytes[b] &&
          sec_offset[b] < sec_offset[a] + sec_bytes[a])
        return Status::Error(StatusCode::kInvalidBlob, "sections %s and %s overlap",
                             kSections[a].name, kSections[b].name);
    }
  return Status::Ok();
}

// `bound`: this tensor's caller address when the program runs on caller
// tensors (ParseModel's tensor_data), else nullptr.
Status CheckTensorRecord(const TensorInfo& t, uint32_t index, const uint8_t* rec,
                         uint32_t arena_size, uint32_t constants_bytes, uint16_t version,
                         void* const* bound) {
  const uint32_t esize = DTypeSize(t.dtype);
  if (esize == 0)
    return Status::Error(StatusCode::kInvalidBlob, "tensor %u: unknown dtype %u", (unsigned)index,
                         (unsigned)rec[kTenDtype]);
  if (t.rank < 1 || t.rank > kMaxRank)
    return Status::Error(StatusCode::kInvalidBlob, "tensor %u: rank %u is not in 1..%u",
                         (unsigned)index, (unsigned)t.rank, (unsigned)kMaxRank);
  const uint8_t flags = rec[kTenFlags];
  if (flags != 0 && (version < kTensorFlagMinVersion || (flags & ~kTensorFlagsKnown) != 0))
    return Status::Error(StatusCode::kInvalidBlob, "tensor %u: flags 0x%x not defined in format version %u",
                         (unsigned)index, (unsigned)flags, (unsigned)version);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < kMaxRank; ++d) {
    uint32_t v = t.dims[d];
    if (d < t.rank) {
      if (v == 0 || v > kMaxDim)
        return Status::Error(StatusCode::kInvalidBlob,
                             "tensor %u: dims[%u] = %u is not in 1..%u (int32 view %d)",
                             (unsigned)index, (unsigned)d, (unsigned)v, (unsigned)kMaxDim, (int)v);
      elements *= v;  // <= 2^24 * 2^31: no uint64 overflow, checked each step
      if (elements > kMaxTensorBytes)
        return Status::Error(StatusCode::kInvalidBlob,
                             "tensor %u: more than %u elements", (unsigned)index,
                             (unsigned)kMaxTensorBytes);
    } else if (v != 0) {
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: dims[%u] = %u beyond rank %u must be 0", (unsigned)index,
                           (unsigned)d, (unsigned)v, (unsigned)t.rank);
    }
  }
  if (flags & kTensorFlagBanded) {
    // A band buffer of whole rows: int8 [1,H,W,C] in the arena, nbytes =
    // rows x W x C with 1 <= rows <= H (elements <= 2^31 was checked).
    if (t.dtype != DType::INT8 || t.rank != 4 || t.dims[0] != 1 || t.memory != Memory::ARENA)
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: a BANDED tensor must be an int8 [1,H,W,C] arena tensor",
                           (unsigned)index);
    const uint64_t row = (uint64_t)t.dims[2] * t.dims[3];
    if (t.nbytes == 0 || t.nbytes % row != 0 || t.nbytes / row > t.dims[1])
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: BANDED nbytes %u is not 1..%u whole rows of %llu bytes",
                           (unsigned)index, (unsigned)t.nbytes, (unsigned)t.dims[1],
                           (unsigned long long)row);
  } else if (elements * esize != t.nbytes)
    return Status::Error(StatusCode::kInvalidBlob,
                         "tensor %u: nbytes %u != %llu elements x %u bytes", (unsigned)index,
                         (unsigned)t.nbytes, (unsigned long long)elements, (unsigned)esize);
  // The arena and CONSTANTS range checks below imply this too; stating it
  // lets every op compute byte counts in uint32_t/int32_t.
  if (t.nbytes > kMaxTensorBytes)
    return Status::Error(StatusCode::kInvalidBlob, "tensor %u: nbytes %u exceed the limit of %u",
                         (unsigned)index, (unsigned)t.nbytes, (unsigned)kMaxTensorBytes);
  // An int8 tensor's zero point is an int8 value; ops may derive offsets
  // from it (negating INT32_MIN would overflow).
  if (t.dtype == DType::INT8 && (t.zero_point < -128 || t.zero_point > 127))
    return Status::Error(StatusCode::kInvalidBlob, "tensor %u: zero_point %d is not in -128..127",
                         (unsigned)index, (int)t.zero_point);
  if (!(t.scale >= 0.0f) || isinf(t.scale))
    return Status::Error(StatusCode::kInvalidBlob, "tensor %u: scale must be finite and >= 0",
                         (unsigned)index);
  if (bound != nullptr) {
    // Caller tensors: every tensor is at its own address, so there is no
    // EXTERNAL binding or band buffer to describe.
    const uintptr_t need = t.memory == Memory::ARENA ? kArenaAlignment : esize;
    if (flags != 0)
      return Status::Error(StatusCode::kInvalidArgument,
                           "tensor %u: flags 0x%x in a program on caller tensors", (unsigned)index,
                           (unsigned)flags);
    if (*bound == nullptr || (uintptr_t)*bound % need != 0)
      return Status::Error(StatusCode::kInvalidArgument,
                           "tensor %u: the caller's data at %p is not %u-byte aligned", (unsigned)index,
                           *bound, (unsigned)need);
  }
  if (flags & kTensorFlagExternal) {
    // Caller-provided bytes: no arena space, so no arena range to check.
    if (t.dtype != DType::FLOAT32 || t.memory != Memory::ARENA || t.offset != 0 ||
        (flags & kTensorFlagBanded) != 0)
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: an EXTERNAL tensor must be a FLOAT32 arena tensor at "
                           "offset 0 and not BANDED",
                           (unsigned)index);
  } else if (t.memory == Memory::ARENA) {
    if (t.offset % kArenaAlignment != 0)
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: arena offset %u is not %u-byte aligned", (unsigned)index,
                           (unsigned)t.offset, (unsigned)kArenaAlignment);
    if (!RangeOk(t.offset, t.nbytes, arena_size))
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: arena bytes [%u, +%u) exceed arena_size %u",
                           (unsigned)index, (unsigned)t.offset, (unsigned)t.nbytes,
                           (unsigned)arena_size);
  } else if (t.memory == Memory::CONSTANT) {
    if (t.offset % esize != 0)
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: %s constant at offset %u is not %u-byte aligned",
                           (unsigned)index, DTypeName(t.dtype), (unsigned)t.offset,
                           (unsigned)esize);
    if (bound == nullptr && !RangeOk(t.offset, t.nbytes, constants_bytes))
      return Status::Error(StatusCode::kInvalidBlob,
                           "tensor %u: constant bytes [%u, +%u) exceed the %u-byte CONSTANTS section",
                           (unsigned)index, (unsigned)t.offset, (unsigned)t.nbytes,
                           (unsigned)constants_bytes);
  } else {
    return Status::Error(StatusCode::kInvalidBlob, "tensor %u: unknown memory kind %u",
                         (unsigned)index, (unsigned)rec[kTenMemory]);
  }
  return Status::Ok();
}

// Set of tensors whose value exists at a point of the execution order.
struct TensorBitset {
  uint8_t bits[kMaxTensors / 8];
  TensorBitset() { clear(); }
  void clear() { memset(bits, 0, sizeof(bits)); }
  bool has(uint32_t i) const { return (bits[i >> 3] >> (i & 7)) & 1; }
  void add(uint32_t i) { bits[i >> 3] = (uint8_t)(bits[i >> 3] | (1u << (i & 7))); }
  void remove(uint32_t i) { bits[i >> 3] = (uint8_t)(bits[i >> 3] & ~(1u << (i & 7))); }
};

Status CheckOp(const Model& m, uint32_t index, const uint8_t* rec, uint32_t io_count,
               uint32_t params_count, TensorBitset* defined, const TensorBitset& graph_inputs) {
  const uint16_t code = LoadU16(rec + kOpOpcode);
  const OpDesc* d = FindOp(code);
  if (d == nullptr || d->min_version > m.version())
    return Status::Error(StatusCode::kInvalidBlob, "op %u: unknown opcode %u for format version %u",
                         (unsigned)index, (unsigned)code, (unsigned)m.version());
  const uint32_t nin = rec[kOpNumInputs], nout = rec[kOpNumOutputs];
  if (nin < d->min_inputs || nin > d->max_inputs || nout < d->min_outputs ||
      nout > d->max_outputs)
    return Status::Error(StatusCode::kInvalidBlob,
                         "op %u (%s): %u inputs / %u outputs, expected %u..%u / %u..%u",
                         (unsigned)index, d->name, (unsigned)nin, (unsigned)nout,
                         (unsigned)d->min_inputs, (unsigned)d->max_inputs,
                         (unsigned)d->min_outputs, (unsigned)d->max_outputs);
  const uint32_t io_start = LoadU32(rec + kOpIoStart);
  if (!RangeOk(io_start, nin + nout, io_count))
    return Status::Error(StatusCode::kInvalidBlob,
                         "op %u (%s): io entries [%u, +%u) exceed OP_IO's %u entries",
                         (unsigned)index, d->name, (unsigned)io_start, (unsigned)(nin + nout),
                         (unsigned)io_count);
  const uint32_t pstart = LoadU32(rec + kOpParamsStart), pcount = LoadU32(rec + kOpParamsCount);
  // Fields appended in a later version (ESPNN_XTS3_PARAM_APPENDS) are absent
  // from an older blob.
  const uint32_t want = NumParamsInVersion((Opcode)code, m.version());
  if (pcount != want)
    return Status::Error(StatusCode::kInvalidBlob, "op %u (%s): %u parameter words, expected %u",
                         (unsigned)index, d->name, (unsigned)pcount, (unsigned)want);
  if (!RangeOk(pstart, pcount, params_count))
    return Status::Error(StatusCode::kInvalidBlob,
                         "op %u (%s): params [%u, +%u) exceed PARAMS' %u words",
                         (unsigned)index, d->name, (unsigned)pstart, (unsigned)pcount,
                         (unsigned)params_count);
  // Only now that the record's ranges are known to be inside their sections
  // may it be decoded.
  const OpInfo op = m.op(index);
  for (uint32_t k = 0; k < nin; ++k) {
    uint16_t t = op.inputs[k];
    if (t == kNoTensor) {
      if (!((d->optional_inputs >> k) & 1))
        return Status::Error(StatusCode::kInvalidBlob, "op %u (%s): input %u is required",
                             (unsigned)op.index, d->name, (unsigned)k);
      continue;
    }
    if (t >= m.num_tensors())
      return Status::Error(StatusCode::kInvalidBlob,
                           "op %u (%s): input %u refers to tensor %u of %u", (unsigned)op.index,
                           d->name, (unsigned)k, (unsigned)t, (unsigned)m.num_tensors());
    if (m.tensor(t).memory == Memory::ARENA && !defined->has(t))
      return Status::Error(StatusCode::kInvalidBlob,
                           "op %u (%s): input %u reads tensor %u before any op writes it",
                           (unsigned)op.index, d->name, (unsigned)k, (unsigned)t);
  }
  for (uint32_t k = 0; k < nout; ++k) {
    uint16_t t = op.outputs[k];
    if (t >= m.num_tensors())
      return Status::Error(StatusCode::kInvalidBlob,
                           "op %u (%s): output %u refers to tensor %u of %u", (unsigned)op.index,
                           d->name, (unsigned)k, (unsigned)t, (unsigned)m.num_tensors());
    if (m.tensor(t).memory != Memory::ARENA)
      return Status::Error(StatusCode::kInvalidBlob, "op %u (%s): output %u (tensor %u) is a constant",
                           (unsigned)op.index, d->name, (unsigned)k, (unsigned)t);
    if (defined->has(t) || graph_inputs.has(t))
      return Status::Error(StatusCode::kInvalidBlob,
                           "op %u (%s): output %u (tensor %u) is already written by a graph input or an earlier op",
                           (unsigned)op.index, d->name, (unsigned)k, (unsigned)t);
    defined->add(t);  // also catches an op writing one tensor twice
  }
  const OpKernel* kernel = LookupOpKernel((Opcode)code);
  if (kernel == nullptr)
    return Status::Error(StatusCode::kOpNotCompiled,
                         "op %u (%s): not compiled into this runtime (selective build: add %s to ESPNN_OPS, "
                         "or enable CONFIG_ESPNN_OP_%s)",
                         (unsigned)op.index, d->name, d->name, d->name);
  Status s = kernel->validate(m, op);
  if (!s.ok()) {
    return Status::Error(StatusCode::kInvalidBlob, "op %u (%s): %s", (unsigned)op.index, d->name,
                         s.message());
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- arena plan
// The AOT planner stores every arena tensor's offset in the blob; nothing at
// run time re-plans. A plan in which an op writes its output over bytes that
// another tensor still needs would make Invoke return wrong numbers without
// any error, so the parser proves the plan safe:
//
//   * graph inputs are written by the caller before Invoke: their ranges are
//     pairwise disjoint;
//   * when op i writes output o, the bytes of o are disjoint from every
//     tensor that is live across op i: op i's own inputs (read while o is
//     written), op i's other outputs, and every tensor read by a later op or
//     returned as a graph output (graph outputs are live to the end).
//
// Two tensors whose lifetimes [written, last read] intersect always meet in
// one of these checks (the later-written one is checked at its writing op
// against the earlier one), so this covers every pair. Liveness is computed
// backwards over the ops with one bitset (the caller's, kMaxTensors bits):
// no heap and O(#outputs x #tensors) time.
//
// Two aliases are allowed, by the op's Aliasing (xts3_format.h):
//   * VIEW (RESHAPE): the output may occupy exactly the bytes of its input
//     (the kernel then copies nothing). It may then also coincide exactly
//     with other live tensors of that very range: by induction on the
//     writing order those are views of the same bytes too, since any other
//     exact coincidence was rejected when it was written.
//   * IN_PLACE (elementwise ops): the output may occupy exactly the bytes
//     of one of its own inputs that is not live after the op (no later op
//     reads it, it is no graph output). Any other tensor on that range is
//     live after the op and so still rejected below, which keeps the
//     induction: live tensors sharing a range always hold the same bytes.
// A partial overlap is never allowed.
struct ArenaRange {
  uint32_t begin, end;  // [begin, end) in the arena; end <= arena_size < 2^31
};

// An EXTERNAL tensor occupies no arena bytes: its range is empty and
// overlaps nothing.
ArenaRange RangeOf(const TensorInfo& t) {
  if (t.flags & kTensorFlagExternal) return {0, 0};
  return {t.offset, t.offset + t.nbytes};
}

bool Overlap(ArenaRange a, ArenaRange b) { return a.begin < b.end && b.begin < a.end; }
bool Same(ArenaRange a, ArenaRange b) { return a.begin == b.begin && a.end == b.end; }

Status OverlapError(const OpInfo& op, uint32_t k, uint16_t o, ArenaRange ro, uint16_t t,
                    ArenaRange rt, const char* why) {
  return Status::Error(StatusCode::kInvalidBlob,
                       "arena plan: op %u (%s) output %u (tensor %u, arena [%u, +%u)) overlaps "
                       "tensor %u (arena [%u, +%u)), %s",
                       (unsigned)op.index, OpcodeName(op.opcode), (unsigned)k, (unsigned)o,
                       (unsigned)ro.begin, (unsigned)(ro.end - ro.begin), (unsigned)t,
                       (unsigned)rt.begin, (unsigned)(rt.end - rt.begin), why);
}

// An IN_PLACE region's output `y` on its input `x`: from x's first byte,
// no longer than x (band_loop.cpp CheckInPlaceShape says which shapes; the
// band loop writes an output row only over input rows no band reads again).
bool InPlaceOver(ArenaRange y, ArenaRange x) { return y.begin == x.begin && y.end <= x.end; }

// A fused region (BAND_LOOP) runs its ops interleaved, band by band, so
// every tensor it reads or writes (and the staging buffer) is live over the
// whole region: each tensor the region writes must be disjoint from every
// other tensor of the region and from every tensor live after it. The one
// alias: an IN_PLACE region's output sits on the region input it replaces
// (InPlaceOver), which must then not be live after the region (the band loop
// writes an output row over an input row only once no later band reads it).
Status CheckRegionArena(const Model& m, uint32_t loop_index, TensorBitset* live) {
  const OpInfo loop = m.op(loop_index);
  const auto p = loop.Params<BAND_LOOP_Params>();
  const uint32_t first = loop_index, last = loop_index + (uint32_t)p.num_ops;
  const bool in_place = (p.flags & kBandFlagInPlace) != 0;
  const uint16_t x = in_place ? m.op(first + 1).inputs[0] : kNoTensor;
  const uint16_t y = in_place ? m.op(last).outputs[0] : kNoTensor;
  for (uint32_t i = first; i <= last; ++i) {
    const OpInfo w = m.op(i);
    for (uint32_t k = 0; k < w.num_outputs; ++k) {
      const uint16_t o = w.outputs[k];
      const ArenaRange ro = RangeOf(m.tensor(o));
      for (uint32_t n_tensors = m.num_tensors(), t = 0; t < n_tensors; ++t)
        if (t != o && live->has(t) && Overlap(ro, RangeOf(m.tensor(t))))
          return OverlapError(w, k, o, ro, (uint16_t)t, RangeOf(m.tensor(t)),
                              "still live (read after the fused region)");
      for (uint32_t j = first; j <= last; ++j) {
        const OpInfo u = m.op(j);
        for (uint32_t q = 0; q < u.num_inputs + u.num_outputs; ++q) {
          const uint16_t t = q < u.num_inputs ? u.inputs[q] : u.outputs[q - u.num_inputs];
          if (t == kNoTensor || t == o || m.tensor(t).memory != Memory::ARENA) continue;
          const ArenaRange rt = RangeOf(m.tensor(t));
          if (!Overlap(ro, rt)) continue;
          if (in_place && ((o == y && t == x && InPlaceOver(ro, rt)) || (o == x && t == y && InPlaceOver(rt, ro))))
            continue;
          return OverlapError(w, k, o, ro, t, rt, "another tensor of the same fused region");
        }
      }
    }
  }
  for (uint32_t i = first; i <= last; ++i) {
    const OpInfo w = m.op(i);
    for (uint32_t k = 0; k < w.num_outputs; ++k) live->remove(w.outputs[k]);
  }
  for (uint32_t i = first; i <= last; ++i) {
    const OpInfo u = m.op(i);
    for (uint32_t j = 0; j < u.num_inputs; ++j) {
      const uint16_t t = u.inputs[j];
      if (t == kNoTensor || m.tensor(t).memory != Memory::ARENA) continue;
      // Inputs written inside the region are not live before it.
      bool inside = false;
      for (uint32_t q = first; q <= last && !inside; ++q) {
        const OpInfo v = m.op(q);
        for (uint32_t k = 0; k < v.num_outputs; ++k) inside = inside || v.outputs[k] == t;
      }
      if (!inside) live->add(t);
    }
  }
  return Status::Ok();
}

Status CheckArenaPlan(const Model& m, TensorBitset* live) {
  for (uint32_t a = 0; a < m.num_inputs(); ++a)
    for (uint32_t b = a + 1; b < m.num_inputs(); ++b) {
      const ArenaRange ra = RangeOf(m.tensor(m.input(a))), rb = RangeOf(m.tensor(m.input(b)));
      if (Overlap(ra, rb))
        return Status::Error(StatusCode::kInvalidBlob,
                             "arena plan: graph input %u (tensor %u, arena [%u, +%u)) overlaps "
                             "graph input %u (tensor %u, arena [%u, +%u))",
                             (unsigned)a, (unsigned)m.input(a), (unsigned)ra.begin,
                             (unsigned)(ra.end - ra.begin), (unsigned)b, (unsigned)m.input(b),
                             (unsigned)rb.begin, (unsigned)(rb.end - rb.begin));
    }

  // The parser has checked that graph outputs, op outputs and the op inputs
  // that are not constants are arena tensors with valid indices.
  live->clear();
  for (uint32_t i = 0; i < m.num_outputs(); ++i) live->add(m.output(i));
  const uint32_t n_tensors = m.num_tensors();
  for (uint32_t i = m.num_ops(); i-- > 0;) {
    const uint32_t loop = band::EnclosingLoop(m, i);
    if (loop != band::kNotInRegion) {  // i is the region's last op (CheckRegions)
      ESPNN_RETURN_IF_ERROR(CheckRegionArena(m, loop, live));
      i = loop;
      continue;
    }
    const OpInfo op = m.op(i);
    for (uint32_t k = 0; k < op.num_outputs; ++k) {
      const uint16_t o = op.outputs[k];
      const ArenaRange ro = RangeOf(m.tensor(o));
      const Aliasing aliasing = OpAliasing(op.opcode);
      bool view = false;
      if (aliasing == Aliasing::VIEW) {
        const TensorInfo in = m.tensor(op.inputs[0]);
        view = in.memory == Memory::ARENA && Same(RangeOf(in), ro);
      }
      for (uint32_t j = 0; j < op.num_inputs; ++j) {
        const uint16_t t = op.inputs[j];
        if (t == kNoTensor || t == o) continue;
        const TensorInfo ti = m.tensor(t);
        if (ti.memory != Memory::ARENA) continue;
        const ArenaRange rt = RangeOf(ti);
        if (!Overlap(ro, rt) || (view && Same(ro, rt))) continue;
        // `live` holds the tensors live after op i at this point.
        if (aliasing == Aliasing::IN_PLACE && Same(ro, rt) && !live->has(t)) continue;
        return OverlapError(op, k, o, ro, t, rt,
                            aliasing == Aliasing::IN_PLACE && Same(ro, rt)
                                ? "an input of the same op that is still live after it"
                                : "an input of the same op");
      }
      for (uint32_t j = k + 1; j < op.num_outputs; ++j) {
        const uint16_t t = op.outputs[j];
        const ArenaRange rt = RangeOf(m.tensor(t));
        if (t != o && Overlap(ro, rt))
          return OverlapError(op, k, o, ro, t, rt, "another output of the same op");
      }
      // Tensors live after op i; skip 8 dead tensors at a time.
      for (uint32_t byte = 0; byte * 8 < n_tensors; ++byte) {
        if (live->bits[byte] == 0) continue;
        for (uint32_t t = byte * 8; t < byte * 8 + 8 && t < n_tensors; ++t) {
          if (t == o || !live->has(t)) continue;
          const ArenaRange rt = RangeOf(m.tensor(t));
          if (Overlap(ro, rt) && !(view && Same(ro, rt)))
            return OverlapError(op, k, o, ro, (uint16_t)t, rt,
                                "still live (read by a later op or a graph output)");
        }
      }
    }
    for (uint32_t k = 0; k < op.num_outputs; ++k) live->remove(op.outputs[k]);
    for (uint32_t j = 0; j < op.num_inputs; ++j) {
      const uint16_t t = op.inputs[j];
      if (t != kNoTensor && m.tensor(t).memory == Memory::ARENA) live->add(t);
    }
  }
  return Status::Ok();
}

}  // namespace

uint32_t TensorInfo::num_elements() const {
  uint32_t n = 1;
  for (uint32_t d = 0; d < rank; ++d) n *= dims[d];
  return n;
}

bool TensorInfo::same_shape(const TensorInfo& o) const {
  if (rank != o.rank) return false;
  for (uint32_t d = 0; d < rank; ++d)
    if (dims[d] != o.dims[d]) return false;
  return true;
}

const char* OpcodeName(Opcode op) {
  const OpDesc* d = FindOp((uint16_t)op);
  return d ? d->name : "UNKNOWN";
}

uint32_t OpcodeMaxInputs(Opcode op) {
  const OpDesc* d = FindOp((uint16_t)op);
  return d ? d->max_inputs : 0;
}

uint32_t OpcodeNumParams(Opcode op) {
  // In the current format version, the one RunSingleOp writes.
  return FindOp((uint16_t)op) ? NumParamsInVersion(op, kFormatVersion) : 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
#define ESPNN_X(name, id, size) \
  case DType::name:             \
    return #name;
    ESPNN_XTS3_DTYPES(ESPNN_X)
#undef ESPNN_X
  }
  return "UNKNOWN";
}

uint32_t DTypeSize(DType dtype) {
  switch (dtype) {
#define ESPNN_X(name, id, size) \
  case DType::name:             \
    return size;
    ESPNN_XTS3_DTYPES(ESPNN_X)
#undef ESPNN_X
  }
  return 0;
}

TensorInfo Model::tensor(uint32_t index) const {
  const uint8_t* r = section_[kTensors] + index * kTensorRecordSize;
  TensorInfo t;
  t.dtype = (DType)r[kTenDtype];
  t.rank = r[kTenRank];
  t.memory = (Memory)r[kTenMemory];
  t.flags = r[kTenFlags];
  t.offset = LoadU32(r + kTenOffset);
  t.nbytes = LoadU32(r + kTenNbytes);
  t.zero_point = (int32_t)LoadU32(r + kTenZeroPoint);
  t.scale = LoadF32(r + kTenScale);
  for (uint32_t d = 0; d < kMaxRank; ++d) t.dims[d] = LoadU32(r + kTenDims + 4 * d);
  t.index = (uint16_t)index;
  return t;
}

OpInfo Model::op(uint32_t index) const {
  const uint8_t* r = section_[kOps] + index * kOpRecordSize;
  OpInfo op;
  op.index = index;
  op.opcode = (Opcode)LoadU16(r + kOpOpcode);
  op.num_inputs = r[kOpNumInputs];
  op.num_outputs = r[kOpNumOutputs];
  op.params_count = LoadU32(r + kOpParamsCount);
  op.params = section_[kParams] + (size_t)LoadU32(r + kOpParamsStart) * 4u;
  op.debug_handle = LoadU32(r + kOpDebugHandle);
  const uint32_t io = LoadU32(r + kOpIoStart);
  // Bounded by the record's own counts, which the parser has range-checked
  // (before that, clamp to the arrays so a bad record cannot overflow them).
  uint32_t nin = op.num_inputs < kMaxOpInputs ? op.num_inputs : kMaxOpInputs;
  uint32_t nout = op.num_outputs < kMaxOpOutputs ? op.num_outputs : kMaxOpOutputs;
  for (uint32_t k = 0; k < kMaxOpInputs; ++k)
    op.inputs[k] = k < nin ? LoadU16(section_[kOpIo] + 2u * (io + k)) : kNoTensor;
  for (uint32_t k = 0; k < kMaxOpOutputs; ++k)
    op.outputs[k] = k < nout ? LoadU16(section_[kOpIo] + 2u * (io + nin + k)) : kNoTensor;
  return op;
}

uint16_t Model::ReadU16At(SectionSlot s, uint32_t i) const { return LoadU16(section_[s] + 2u * i); }

const uint8_t* Model::constant_data(const TensorInfo& t) const {
  if (t.memory != Memory::CONSTANT) return nullptr;
  return tensor_data_ ? (const uint8_t*)tensor_data_[t.index] : section_[kConstants] + t.offset;
}

Status ParseModel(const void* data, size_t size, Model* out, void* const* tensor_data) {
  *out = Model();
  if (data == nullptr)
    return Status::Error(StatusCode::kInvalidArgument, "blob pointer is null");
  if ((uintptr_t)data % kBlobAlignment != 0)
    return Status::Error(StatusCode::kInvalidArgument,
                         "blob at %p is not %u-byte aligned; copy it to an aligned buffer", data,
                         (unsigned)kBlobAlignment);
  const uint8_t* p = (const uint8_t*)data;
  const uint32_t size32 = size > kMaxBlobBytes ? kMaxBlobBytes : (uint32_t)size;

  Model m;
  uint32_t off[kNumSectionKinds] = {}, bytes[kNumSectionKinds] = {}, count[kNumSectionKinds] = {};
  ESPNN_RETURN_IF_ERROR(ParseHeaderAndSections(p, size32, &m.version_, &m.arena_size_, off,
                                               bytes, count));
  m.base_ = p;
  m.size_ = LoadU32(p + kHdrBlobSize);
  // The Model's slots follow the section ids (TENSORS = 1 -> slot 0 ...).
  for (uint32_t i = 0; i < kNumSectionKinds; ++i) {
    m.section_[i] = p + off[i];
    m.section_bytes_[i] = bytes[i];
    m.count_[i] = count[i];
  }

  if (m.num_tensors() > kMaxTensors)
    return Status::Error(StatusCode::kInvalidBlob, "%u tensors exceed the limit of %u",
                         (unsigned)m.num_tensors(), (unsigned)kMaxTensors);
  if (m.num_ops() > kMaxOps)
    return Status::Error(StatusCode::kInvalidBlob, "%u ops exceed the limit of %u",
                         (unsigned)m.num_ops(), (unsigned)kMaxOps);
  if (m.num_inputs() < 1 || m.num_inputs() > kMaxGraphInputs)
    return Status::Error(StatusCode::kInvalidBlob, "%u graph inputs; expected 1..%u",
                         (unsigned)m.num_inputs(), (unsigned)kMaxGraphInputs);
  if (m.num_outputs() < 1 || m.num_outputs() > kMaxGraphOutputs)
    return Status::Error(StatusCode::kInvalidBlob, "%u graph outputs; expected 1..%u",
                         (unsigned)m.num_outputs(), (unsigned)kMaxGraphOutputs);

  for (uint32_t i = 0; i < m.num_tensors(); ++i) {
    ESPNN_RETURN_IF_ERROR(CheckTensorRecord(m.tensor(i), i,
                                            m.section_[Model::kTensors] + i * kTensorRecordSize,
                                            m.arena_size_, m.section_bytes_[Model::kConstants],
                                            m.version_, tensor_data ? &tensor_data[i] : nullptr));
  }
  m.tensor_data_ = tensor_data;  // op validation reads bound constants (constant_data)

  TensorBitset defined, graph_inputs;
  for (uint32_t i = 0; i < m.num_inputs(); ++i) {
    uint16_t t = m.input(i);
    if (t >= m.num_tensors())
      return Status::Error(StatusCode::kInvalidBlob, "graph input %u refers to tensor %u of %u",
                           (unsigned)i, (unsigned)t, (unsigned)m.num_tensors());
    if (m.tensor(t).memory != Memory::ARENA)
      return Status::Error(StatusCode::kInvalidBlob,
                           "graph input %u (tensor %u) must live in the arena", (unsigned)i,
                           (unsigned)t);
    if (graph_inputs.has(t))
      return Status::Error(StatusCode::kInvalidBlob, "graph input %u repeats tensor %u",
                           (unsigned)i, (unsigned)t);
    graph_inputs.add(t);
    defined.add(t);
  }

  // EXTERNAL tensors are graph inputs (so no op writes them: CheckOp rejects
  // an output that a graph input already defines) or, from version
  // kExternalOutputMinVersion, graph outputs written by an op (checked with
  // the graph outputs below).
  for (uint32_t t = 0; t < m.num_tensors(); ++t) {
    if ((m.tensor(t).flags & kTensorFlagExternal) == 0 || graph_inputs.has(t)) continue;
    bool output = false;
    for (uint32_t i = 0; i < m.num_outputs() && !output; ++i) output = m.output(i) == t;
    if (!output || m.version_ < kExternalOutputMinVersion)
      return Status::Error(StatusCode::kInvalidBlob,
                           output ? "tensor %u: an EXTERNAL graph output needs format version 5"
                                  : "tensor %u: EXTERNAL but not a graph input or a graph output",
                           (unsigned)t);
  }

  for (uint32_t i = 0; i < m.num_ops(); ++i) {
    const uint8_t* rec = m.section_[Model::kOps] + i * kOpRecordSize;
    ESPNN_RETURN_IF_ERROR(CheckOp(m, i, rec, m.count_[Model::kOpIo], m.count_[Model::kParams],
                                  &defined, graph_inputs));
  }

  for (uint32_t i = 0; i < m.num_outputs(); ++i) {
    uint16_t t = m.output(i);
    if (t >= m.num_tensors())
      return Status::Error(StatusCode::kInvalidBlob, "graph output %u refers to tensor %u of %u",
                           (unsigned)i, (unsigned)t, (unsigned)m.num_tensors());
    if (m.tensor(t).memory != Memory::ARENA || !defined.has(t))
      return Status::Error(StatusCode::kInvalidBlob,
                           "graph output %u (tensor %u) is not written by any op or graph input",
                           (unsigned)i, (unsigned)t);
    if ((m.tensor(t).flags & kTensorFlagExternal) == 0) continue;
    // The caller's buffer: an op must write it (a graph input that is also
    // an output would be two caller buffers for one tensor), and it is bound
    // once, so it is listed once.
    if (graph_inputs.has(t))
      return Status::Error(StatusCode::kInvalidBlob,
                           "graph output %u (tensor %u) is EXTERNAL and also a graph input",
                           (unsigned)i, (unsigned)t);
    for (uint32_t j = 0; j < i; ++j)
      if (m.output(j) == t)
        return Status::Error(StatusCode::kInvalidBlob,
                             "graph output %u (tensor %u) is EXTERNAL and repeats graph output %u",
                             (unsigned)i, (unsigned)t, (unsigned)j);
  }
  {
    Status s = band::CheckRegions(m);
    if (!s.ok()) return Status::Error(StatusCode::kInvalidBlob, "%s", s.message());
  }
  // `defined` is not needed any more: it becomes the live set.
  ESPNN_RETURN_IF_ERROR(CheckArenaPlan(m, &defined));
  *out = m;
  return Status::Ok();
}

}  // namespace espnn
