// XTSB bundle container parser (see espnn/bundle.h). Same rules as the XTS3
// parser: byte loads only, uint32_t arithmetic with "fits before it is
// computed" checks, size_t never used for bundle-controlled quantities.
#include "espnn/bundle.h"

#include <string.h>

#include "espnn/byte_reader.h"
#include "espnn/xts3_format.h"

namespace espnn {
namespace bundle {
namespace {

using bytes::LoadU16;
using bytes::LoadU32;
using bytes::RangeOk;

static_assert(kPayloadAlignment == xts3::kBlobAlignment,
              "model payloads must be placed where ParseModel accepts them");
static_assert((uint64_t)kMaxCases * kCaseRecordSize < 0xFFFFFFFFull,
              "case table size must fit uint32_t");

bool NameCharOk(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

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

// CRC-32 with a 16-entry table (4 bits at a time): 64 bytes of table instead
// of 1 KiB, fast enough for a few MB of flash at boot.
constexpr uint32_t kCrcNibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
    0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
    0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};

}  // namespace

uint32_t Crc32(const uint8_t* data, uint32_t size, uint32_t crc) {
  crc = ~crc;
  for (uint32_t i = 0; i < size; ++i) {
    crc ^= data[i];
    crc = (crc >> 4) ^ kCrcNibble[crc & 0xFu];
    crc = (crc >> 4) ^ kCrcNibble[crc & 0xFu];
  }
  return ~crc;
}

uint32_t PeekBundleSize(const void* header, size_t size) {
  const uint8_t* p = (const uint8_t*)header;
  if (p == nullptr || size < kHeaderSize || LoadU32(p + kHdrMagic) != kMagic ||
      LoadU16(p + kHdrVersion) != kVersion || LoadU16(p + kHdrHeaderSize) != kHeaderSize)
    return 0;
  const uint32_t n = LoadU32(p + kHdrBundleSize);
  return n < kHeaderSize || n > kMaxBundleBytes ? 0 : n;
}

Case Bundle::case_at(uint32_t index) const {
  const uint8_t* r = base_ + table_ + index * kCaseRecordSize;
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
  if (data == nullptr)
    return Status::Error(StatusCode::kInvalidArgument, "bundle pointer is null");
  const uint8_t* p = (const uint8_t*)data;
  const uint32_t size32 = size > kMaxBundleBytes ? kMaxBundleBytes : (uint32_t)size;
  if (size32 < kHeaderSize)
    return Status::Error(StatusCode::kInvalidBlob,
                         "bundle is %u bytes, smaller than the %u-byte header", (unsigned)size32,
                         (unsigned)kHeaderSize);
  const uint32_t magic = LoadU32(p + kHdrMagic);
  if (magic != kMagic) {
    if (magic == xts3::kMagic)
      return Status::Error(StatusCode::kInvalidBlob,
                           "bundle header: this is a bare XTS3 model, not a bundle "
                           "(wrap it with executorch_espnn.bundle)");
    return Status::Error(StatusCode::kInvalidBlob,
                         "bundle header: bad magic 0x%08x (expected 'XTSB')", (unsigned)magic);
  }
  const uint16_t version = LoadU16(p + kHdrVersion);
  if (version != kVersion)
    return Status::Error(StatusCode::kUnsupportedVersion,
                         "bundle header: version %u is not supported (this runner reads %u)",
                         (unsigned)version, (unsigned)kVersion);
  if (LoadU16(p + kHdrHeaderSize) != kHeaderSize)
    return Status::Error(StatusCode::kInvalidBlob, "bundle header: header_size is %u, expected %u",
                         (unsigned)LoadU16(p + kHdrHeaderSize), (unsigned)kHeaderSize);
  const uint32_t bundle_size = LoadU32(p + kHdrBundleSize);
  if (bundle_size < kHeaderSize || bundle_size > kMaxBundleBytes)
    return Status::Error(StatusCode::kInvalidBlob, "bundle header: bundle_size %u is out of range",
                         (unsigned)bundle_size);
  if (bundle_size > size32)
    return Status::Error(StatusCode::kInvalidBlob,
                         "bundle header: bundle_size %u exceeds the %u bytes given (truncated "
                         "bundle, or the partition is too small)",
                         (unsigned)bundle_size, (unsigned)size32);
  if (LoadU32(p + kHdrFlags) != 0)
    return Status::Error(StatusCode::kInvalidBlob, "bundle header: flags 0x%x are not defined",
                         (unsigned)LoadU32(p + kHdrFlags));
  if (LoadU32(p + kHdrReserved) != 0)
    return Status::Error(StatusCode::kInvalidBlob, "bundle header: reserved field is not 0");
  const uint32_t count = LoadU32(p + kHdrCaseCount);
  if (count < 1 || count > kMaxCases)
    return Status::Error(StatusCode::kInvalidBlob, "bundle header: case_count %u is not in 1..%u",
                         (unsigned)count, (unsigned)kMaxCases);
  const uint32_t table = LoadU32(p + kHdrCaseTable);
  if (table < kHeaderSize || table % 4 != 0 ||
      !RangeOk(table, count * kCaseRecordSize, bundle_size))
    return Status::Error(StatusCode::kInvalidBlob,
                         "bundle header: case table at offset %u (%u records) does not fit the "
                         "%u-byte bundle",
                         (unsigned)table, (unsigned)count, (unsigned)bundle_size);
  // The checksum covers everything after the header, so a partially written
  // or stale partition is reported as such rather than as a parse error.
  const uint32_t crc = Crc32(p + kHeaderSize, bundle_size - kHeaderSize);
  if (crc != LoadU32(p + kHdrCrc32))
    return Status::Error(StatusCode::kInvalidBlob,
                         "bundle: CRC-32 0x%08x of bytes [%u, %u) does not match the header's "
                         "0x%08x (corrupt or partly written bundle)",
                         (unsigned)crc, (unsigned)kHeaderSize, (unsigned)bundle_size,
                         (unsigned)LoadU32(p + kHdrCrc32));

  const uint32_t table_end = table + count * kCaseRecordSize;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* r = p + table + i * kCaseRecordSize;
    const uint32_t name_off = LoadU32(r + kCaseNameOffset), name_size = LoadU32(r + kCaseNameSize);
    if (name_size < 1 || name_size > kMaxNameBytes)
      return Status::Error(StatusCode::kInvalidBlob, "case %u: name_size %u is not in 1..%u",
                           (unsigned)i, (unsigned)name_size, (unsigned)kMaxNameBytes);
    ESPNN_RETURN_IF_ERROR(CheckPayload(i, "name", name_off, name_size, 1, table_end, bundle_size));
    for (uint32_t k = 0; k < name_size; ++k)
      if (!NameCharOk(p[name_off + k]))
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
  out->size_ = bundle_size;
  out->count_ = count;
  out->table_ = table;
  return Status::Ok();
}

}  // namespace bundle
}  // namespace espnn
