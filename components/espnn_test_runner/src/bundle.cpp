// XTSB bundle container parser (see espnn/bundle.h). Same rules as the XTS3
// parser: byte loads only, uint32_t arithmetic with "fits before it is
// computed" checks, size_t never used for bundle-controlled quantities.
#include "espnn/bundle.h"

#include <string.h>

#include "espnn/byte_reader.h"
#include "espnn/container_header.h"
#include "espnn/xts3_format.h"

namespace espnn {
namespace bundle {
namespace {

using bytes::LoadU32;
using bytes::RangeOk;

static_assert(kPayloadAlignment == xts3::kBlobAlignment,
              "model payloads must be placed where ParseModel accepts them");
static_assert((uint64_t)kMaxCases * kCaseRecordSize < 0xFFFFFFFFull,
              "case table size must fit uint32_t");
static_assert(kMaxBundleBytes == container::kMaxContainerBytes, "one size limit for both containers");

constexpr container::HeaderLayout kHeaderLayout = {
    "bundle", "XTSB", "bundle_size", kMagic, kVersion, kHeaderSize, kHdrMagic, kHdrVersion,
    kHdrHeaderSize, kHdrBundleSize, kHdrFlags, kHdrCaseCount, kHdrCaseTable, kHdrCrc32,
    kHdrReserved, kCaseRecordSize, kMaxCases};

// A payload region of a case record: aligned, inside the bundle, after the
// header and case table.
Status CheckPayload(uint32_t index, const char* what, uint32_t offset, uint32_t size,
                    uint32_t align, uint32_t table_end, uint32_t bundle_size) {
  if (offset % align != 0)
    return Status::Error(StatusCode::kInvalidBlob, "case %u: %s offset %u is not %u-byte aligned",
                         (unsigned)index, what, (unsigned)offset, (unsigned)align);
  if (!RangeOk(offset, size, bundle_size))
    return Status::Error(StatusCode::kInvalidBlob,
                         "case %u: %s bytes [%u, +%u) exceed the %u-byte bundle", (unsigned)index,
                         what, (unsigned)offset, (unsigned)size, (unsigned)bundle_size);
  if (size != 0 && offset < table_end)
    return Status::Error(StatusCode::kInvalidBlob,
                         "case %u: %s at offset %u overlaps the header or case table",
                         (unsigned)index, what, (unsigned)offset);
  return Status::Ok();
}

}  // namespace

uint32_t PeekBundleSize(const void* header, size_t size) {
  return container::PeekSize(kHeaderLayout, header, size);
}

Case Bundle::case_at(uint32_t index) const {
  const uint8_t* r = base_ + header_.case_table + index * kCaseRecordSize;
  Case c;
  c.name = (const char*)base_ + LoadU32(r + kCaseNameOffset);
  c.name_size = LoadU32(r + kCaseNameSize);
  c.model = base_ + LoadU32(r + kCaseModelOffset);
  c.model_size = LoadU32(r + kCaseModelSize);
  c.inputs = base_ + LoadU32(r + kCaseInputsOffset);
  c.inputs_size = LoadU32(r + kCaseInputsSize);
  c.expected = base_ + LoadU32(r + kCaseExpectedOffset);
  c.expected_size = LoadU32(r + kCaseExpectedSize);
  c.runs = LoadU32(r + kCaseRuns);
  return c;
}

Status ParseBundle(const void* data, size_t size, Bundle* out) {
  *out = Bundle();
  // A bare model where a bundle belongs is a common mistake: say so.
  if (data != nullptr && size >= kHeaderSize && LoadU32((const uint8_t*)data + kHdrMagic) == xts3::kMagic)
    return Status::Error(StatusCode::kInvalidBlob,
                         "bundle header: this is a bare XTS3 model, not a bundle "
                         "(wrap it with executorch_espnn.bundle)");
  container::Header h;
  ESPNN_RETURN_IF_ERROR(container::CheckHeader(kHeaderLayout, data, size, &h));
  const uint8_t* p = (const uint8_t*)data;
  const uint32_t bundle_size = h.size, count = h.case_count, table = h.case_table;
  const uint32_t table_end = table + count * kCaseRecordSize;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* r = p + table + i * kCaseRecordSize;
    const uint32_t name_off = LoadU32(r + kCaseNameOffset), name_size = LoadU32(r + kCaseNameSize);
    if (name_size < 1 || name_size > kMaxNameBytes)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: name_size %u is not in 1..%u",
                           (unsigned)i, (unsigned)name_size, (unsigned)kMaxNameBytes);
    ESPNN_RETURN_IF_ERROR(CheckPayload(i, "name", name_off, name_size, 1, table_end, bundle_size));
    for (uint32_t k = 0; k < name_size; ++k)
      if (!container::CaseNameCharOk(p[name_off + k]))
        return Status::Error(StatusCode::kInvalidBlob,
                             "case %u: name byte %u is 0x%02x; names use [A-Za-z0-9_.-]",
                             (unsigned)i, (unsigned)k, (unsigned)p[name_off + k]);
    ESPNN_RETURN_IF_ERROR(CheckPayload(i, "model", LoadU32(r + kCaseModelOffset),
                                       LoadU32(r + kCaseModelSize), kPayloadAlignment, table_end,
                                       bundle_size));
    ESPNN_RETURN_IF_ERROR(CheckPayload(i, "inputs", LoadU32(r + kCaseInputsOffset),
                                       LoadU32(r + kCaseInputsSize), kPayloadAlignment, table_end,
                                       bundle_size));
    ESPNN_RETURN_IF_ERROR(CheckPayload(i, "expected", LoadU32(r + kCaseExpectedOffset),
                                       LoadU32(r + kCaseExpectedSize), kPayloadAlignment,
                                       table_end, bundle_size));
    if (LoadU32(r + kCaseModelSize) == 0)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: model is empty", (unsigned)i);
    if (LoadU32(r + kCaseRuns) > kMaxRuns)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: runs %u exceed the limit of %u",
                           (unsigned)i, (unsigned)LoadU32(r + kCaseRuns), (unsigned)kMaxRuns);
    if (LoadU32(r + kCaseFlags) != 0 || LoadU32(r + kCaseReserved0) != 0 ||
        LoadU32(r + kCaseReserved1) != 0)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: flags and reserved fields must be 0",
                           (unsigned)i);
    // Result lines are keyed by name: names must be unique.
    for (uint32_t j = 0; j < i; ++j) {
      const uint8_t* q = p + table + j * kCaseRecordSize;
      if (LoadU32(q + kCaseNameSize) == name_size &&
          memcmp(p + LoadU32(q + kCaseNameOffset), p + name_off, name_size) == 0)
        return Status::Error(StatusCode::kInvalidBlob, "case %u: name repeats case %u's",
                             (unsigned)i, (unsigned)j);
    }
  }
  out->base_ = p;
  out->header_ = h;
  return Status::Ok();
}

}  // namespace bundle
}  // namespace espnn
