// XTSP .pte suite parser and the output comparison rule (see pte_suite.h).
#include "espnn/pte_suite.h"

#include <math.h>
#include <string.h>

#include "espnn/byte_reader.h"
#include "espnn/container_header.h"

namespace espnn {
namespace pte {
namespace {

using bytes::LoadU16;
using bytes::LoadU32;
using bytes::LoadF32;
using bytes::RangeOk;

static_assert((uint64_t)kMaxCases * kCaseRecordSize < 0xFFFFFFFFull, "case table fits uint32_t");
static_assert(kTensorDims + 4 * kMaxRank == kTensorRecordSize, "tensor record layout");

constexpr container::HeaderLayout kHeaderLayout = {
    "suite", "XTSP", "suite_size", kMagic, kVersion, kHeaderSize, kHdrMagic, kHdrVersion,
    kHdrHeaderSize, kHdrSuiteSize, kHdrFlags, kHdrCaseCount, kHdrCaseTable, kHdrCrc32,
    kHdrReserved, kCaseRecordSize, kMaxCases};

bool MethodCharOk(uint8_t c, bool first) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
         (!first && c >= '0' && c <= '9');
}

bool IsFloat(uint32_t dtype) {
  return dtype == kDtypeFloat16 || dtype == kDtypeFloat32 || dtype == kDtypeFloat64;
}

// One tensor record at `off`: known dtype, rank, data size = elements *
// element size (checked without overflow), data aligned, inside the suite
// and after the tables.
Status CheckTensor(const uint8_t* base, uint32_t off, uint32_t tables_end, uint32_t size,
                   uint32_t index, const char* what, uint32_t k, bool output) {
  const uint8_t* r = base + off;
  const uint32_t dtype = LoadU32(r + kTensorDtype);
  const uint32_t rank = LoadU32(r + kTensorRank);
  const uint32_t d_off = LoadU32(r + kTensorDataOffset);
  const uint32_t d_size = LoadU32(r + kTensorDataSize);
  const uint32_t elem = DtypeSize(dtype);
  if (elem == 0)
    return Status::Error(StatusCode::kInvalidBlob, "case %u %s %u: dtype code %u is not supported",
                         (unsigned)index, what, (unsigned)k, (unsigned)dtype);
  if (rank > kMaxRank)
    return Status::Error(StatusCode::kInvalidBlob, "case %u %s %u: rank %u > %u", (unsigned)index,
                         what, (unsigned)k, (unsigned)rank, (unsigned)kMaxRank);
  uint32_t bytes = elem;
  for (uint32_t d = 0; d < kMaxRank; ++d) {
    const uint32_t dim = LoadU32(r + kTensorDims + 4 * d);
    if (d >= rank) {
      if (dim != 0)
        return Status::Error(StatusCode::kInvalidBlob, "case %u %s %u: dims[%u] beyond rank is not 0",
                             (unsigned)index, what, (unsigned)k, (unsigned)d);
      continue;
    }
    if (dim != 0 && bytes > 0xFFFFFFFFu / dim)
      return Status::Error(StatusCode::kInvalidBlob, "case %u %s %u: size overflows 32 bits",
                           (unsigned)index, what, (unsigned)k);
    bytes *= dim;
  }
  if (bytes != d_size)
    return Status::Error(StatusCode::kInvalidBlob,
                         "case %u %s %u: %u data bytes do not match its shape (%u bytes of %s)",
                         (unsigned)index, what, (unsigned)k, (unsigned)d_size, (unsigned)bytes,
                         DtypeName(dtype));
  if (d_off % kDataAlignment != 0 || !RangeOk(d_off, d_size, size) ||
      (d_size != 0 && d_off < tables_end))
    return Status::Error(StatusCode::kInvalidBlob,
                         "case %u %s %u: data [%u, +%u) is misaligned or outside the suite data",
                         (unsigned)index, what, (unsigned)k, (unsigned)d_off, (unsigned)d_size);
  const float atol = LoadF32(r + kTensorAtol);
  if (!(atol >= 0.0f) || isinf(atol) || (atol != 0.0f && (!output || !IsFloat(dtype))))
    return Status::Error(StatusCode::kInvalidBlob,
                         "case %u %s %u: tolerance must be 0, or finite and > 0 on a float output",
                         (unsigned)index, what, (unsigned)k);
  if (LoadU32(r + kTensorFlags) != 0 || LoadU32(r + kTensorReserved0) != 0 ||
      LoadU32(r + kTensorReserved1) != 0)
    return Status::Error(StatusCode::kInvalidBlob, "case %u %s %u: flags/reserved fields are not 0",
                         (unsigned)index, what, (unsigned)k);
  return Status::Ok();
}

// Half-precision bits to float (for tolerance comparisons of float16).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = (uint32_t)(h >> 15) << 31;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  float f;
  if (exp == 0) {
    f = ldexpf((float)man, -24);
  } else if (exp == 31) {
    f = man ? NAN : INFINITY;
  } else {
    f = ldexpf((float)(man | 0x400u), (int)exp - 25);
  }
  return sign ? -f : f;
}

uint64_t ElementBits(const uint8_t* p, uint32_t width) {
  uint64_t v = 0;
  for (uint32_t b = 0; b < width; ++b) v |= (uint64_t)p[b] << (8 * b);
  return v;
}

double ElementValue(const uint8_t* p, uint32_t dtype) {
  if (dtype == kDtypeFloat16) return HalfToFloat(LoadU16(p));
  if (dtype == kDtypeFloat32) return LoadF32(p);
  const uint64_t bits = ElementBits(p, 8);
  double d;
  memcpy(&d, &bits, sizeof(d));
  return d;
}

}  // namespace

uint32_t DtypeSize(uint32_t dtype) {
  switch (dtype) {
    case kDtypeUInt8: case kDtypeInt8: case kDtypeBool: return 1;
    case kDtypeInt16: case kDtypeFloat16: return 2;
    case kDtypeInt32: case kDtypeFloat32: return 4;
    case kDtypeInt64: case kDtypeFloat64: return 8;
    default: return 0;
  }
}

const char* DtypeName(uint32_t dtype) {
  switch (dtype) {
    case kDtypeUInt8: return "uint8";
    case kDtypeInt8: return "int8";
    case kDtypeInt16: return "int16";
    case kDtypeInt32: return "int32";
    case kDtypeInt64: return "int64";
    case kDtypeFloat16: return "float16";
    case kDtypeFloat32: return "float32";
    case kDtypeFloat64: return "float64";
    case kDtypeBool: return "bool";
    default: return "?";
  }
}

uint32_t PeekSuiteSize(const void* header, size_t size) {
  return container::PeekSize(kHeaderLayout, header, size);
}

Case Suite::case_at(uint32_t index) const {
  const uint8_t* r = base_ + header_.case_table + index * kCaseRecordSize;
  Case c;
  c.name = (const char*)base_ + LoadU32(r + kCaseNameOffset);
  c.name_size = LoadU32(r + kCaseNameSize);
  c.inputs_table = LoadU32(r + kCaseInputsTable);
  c.input_count = LoadU32(r + kCaseInputCount);
  c.outputs_table = LoadU32(r + kCaseOutputsTable);
  c.output_count = LoadU32(r + kCaseOutputCount);
  c.flags = LoadU32(r + kCaseFlags);
  c.runs = LoadU32(r + kCaseRuns);
  return c;
}

Tensor Suite::TensorAt(uint32_t offset) const {
  const uint8_t* r = base_ + offset;
  Tensor t;
  t.dtype = LoadU32(r + kTensorDtype);
  t.rank = LoadU32(r + kTensorRank);
  for (uint32_t d = 0; d < kMaxRank; ++d) t.dims[d] = LoadU32(r + kTensorDims + 4 * d);
  t.data = base_ + LoadU32(r + kTensorDataOffset);
  t.size = LoadU32(r + kTensorDataSize);
  t.atol = LoadF32(r + kTensorAtol);
  return t;
}

Tensor Suite::input(const Case& c, uint32_t i) const {
  return TensorAt(c.inputs_table + i * kTensorRecordSize);
}
Tensor Suite::output(const Case& c, uint32_t i) const {
  return TensorAt(c.outputs_table + i * kTensorRecordSize);
}

Status ParseSuite(const void* data, size_t size, Suite* out) {
  if (out == nullptr) return Status::Error(StatusCode::kInvalidArgument, "suite pointer is null");
  container::Header h;
  ESPNN_RETURN_IF_ERROR(container::CheckHeader(kHeaderLayout, data, size, &h));
  const uint8_t* p = (const uint8_t*)data;
  const uint32_t suite_size = h.size, count = h.case_count, table = h.case_table;
  // Everything the records point to lies after the case table and tensor
  // tables; find where those end first.
  uint32_t tables_end = table + count * kCaseRecordSize;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* r = p + table + i * kCaseRecordSize;
    for (int io = 0; io < 2; ++io) {
      const uint32_t t_off = LoadU32(r + (io ? kCaseOutputsTable : kCaseInputsTable));
      const uint32_t n = LoadU32(r + (io ? kCaseOutputCount : kCaseInputCount));
      // A negative case (kCaseFlagExpectInvalidArgument) has no outputs; any other case at least one.
      const bool negative = (LoadU32(r + kCaseFlags) & kCaseFlagExpectInvalidArgument) != 0;
      if (io == 1 && negative && n != 0)
        return Status::Error(StatusCode::kInvalidBlob, "case %u: a case that expects a refusal has %u outputs",
                             (unsigned)i, (unsigned)n);
      if (n > kMaxTensors || (io == 1 && n == 0 && !negative))
        return Status::Error(StatusCode::kInvalidBlob, "case %u: %u %s (allowed %s..%u)",
                             (unsigned)i, (unsigned)n, io ? "outputs" : "inputs", io ? "1" : "0",
                             (unsigned)kMaxTensors);
      if (t_off % 4 != 0 || t_off < table + count * kCaseRecordSize ||
          !RangeOk(t_off, n * kTensorRecordSize, suite_size))
        return Status::Error(StatusCode::kInvalidBlob, "case %u: %s table at %u is invalid",
                             (unsigned)i, io ? "output" : "input", (unsigned)t_off);
      if (t_off + n * kTensorRecordSize > tables_end) tables_end = t_off + n * kTensorRecordSize;
    }
  }
  const uint32_t m_off = LoadU32(p + kHdrMethodOffset), m_size = LoadU32(p + kHdrMethodSize);
  if (m_size < 1 || m_size > kMaxMethodBytes || !RangeOk(m_off, m_size, suite_size) ||
      m_off < tables_end)
    return Status::Error(StatusCode::kInvalidBlob, "suite header: method name [%u, +%u) is invalid",
                         (unsigned)m_off, (unsigned)m_size);
  for (uint32_t k = 0; k < m_size; ++k)
    if (!MethodCharOk(p[m_off + k], k == 0))
      return Status::Error(StatusCode::kInvalidBlob, "suite header: method name is not an identifier");
  const uint32_t pte_off = LoadU32(p + kHdrPteOffset), pte_size = LoadU32(p + kHdrPteSize);
  if (pte_off % kPteAlignment != 0 || pte_size == 0 || !RangeOk(pte_off, pte_size, suite_size) ||
      pte_off < tables_end)
    return Status::Error(StatusCode::kInvalidBlob,
                         "suite header: .pte [%u, +%u) is empty, outside the suite or not %u-byte "
                         "aligned in it",
                         (unsigned)pte_off, (unsigned)pte_size, (unsigned)kPteAlignment);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* r = p + table + i * kCaseRecordSize;
    const uint32_t n_off = LoadU32(r + kCaseNameOffset), n_size = LoadU32(r + kCaseNameSize);
    if (n_size < 1 || n_size > kMaxNameBytes)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: name_size %u is not in 1..%u",
                           (unsigned)i, (unsigned)n_size, (unsigned)kMaxNameBytes);
    if (!RangeOk(n_off, n_size, suite_size) || n_off < tables_end)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: name [%u, +%u) is outside the suite data",
                           (unsigned)i, (unsigned)n_off, (unsigned)n_size);
    for (uint32_t k = 0; k < n_size; ++k)
      if (!container::CaseNameCharOk(p[n_off + k]))
        return Status::Error(StatusCode::kInvalidBlob, "case %u: name has a character outside [A-Za-z0-9_.-]",
                             (unsigned)i);
    const uint32_t runs = LoadU32(r + kCaseRuns);
    if (runs > kMaxRuns)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: runs %u > %u", (unsigned)i,
                           (unsigned)runs, (unsigned)kMaxRuns);
    if ((LoadU32(r + kCaseFlags) & ~kCaseFlagExpectInvalidArgument) != 0)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: unknown flags 0x%x", (unsigned)i,
                           (unsigned)LoadU32(r + kCaseFlags));
    for (int io = 0; io < 2; ++io) {
      const uint32_t t_off = LoadU32(r + (io ? kCaseOutputsTable : kCaseInputsTable));
      const uint32_t n = LoadU32(r + (io ? kCaseOutputCount : kCaseInputCount));
      for (uint32_t k = 0; k < n; ++k)
        ESPNN_RETURN_IF_ERROR(CheckTensor(p, t_off + k * kTensorRecordSize, tables_end, suite_size, i,
                                          io ? "output" : "input", k, io == 1));
    }
  }
  out->base_ = p;
  out->header_ = h;
  out->pte_offset_ = pte_off;
  out->pte_size_ = pte_size;
  memcpy(out->method_, p + m_off, m_size);
  out->method_[m_size] = '\0';
  return Status::Ok();
}

Comparison CompareOutput(const Tensor& expected, const void* got) {
  Comparison c;
  const uint32_t width = expected.dtype_size();
  const uint32_t n = expected.elements();
  const uint8_t* g = (const uint8_t*)got;
  const bool tolerant = expected.atol > 0.0f && IsFloat(expected.dtype);
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* gp = g + (size_t)i * width;
    const uint8_t* wp = expected.data + (size_t)i * width;
    bool same;
    if (tolerant) {
      const double gv = ElementValue(gp, expected.dtype), wv = ElementValue(wp, expected.dtype);
      same = (isnan(gv) && isnan(wv)) || fabs(gv - wv) <= (double)expected.atol;
    } else {
      same = memcmp(gp, wp, width) == 0;
    }
    if (!same) {
      if (c.diff++ == 0) {
        c.first = i;
        c.got_bits = ElementBits(gp, width);
        c.want_bits = ElementBits(wp, width);
      }
    }
  }
  return c;
}

}  // namespace pte
}  // namespace espnn
