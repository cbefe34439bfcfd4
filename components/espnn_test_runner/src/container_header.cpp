// The header rules XTSB bundles and XTSP suites share (espnn/container_header.h).
#include "espnn/container_header.h"

#include "espnn/byte_reader.h"

namespace espnn {
namespace container {
namespace {

using bytes::LoadU16;
using bytes::LoadU32;
using bytes::RangeOk;

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

bool CaseNameCharOk(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

uint32_t PeekSize(const HeaderLayout& f, const void* header, size_t available) {
  const uint8_t* p = (const uint8_t*)header;
  if (p == nullptr || available < f.header_size || LoadU32(p + f.magic_field) != f.magic ||
      LoadU16(p + f.version_field) != f.version || LoadU16(p + f.header_size_field) != f.header_size)
    return 0;
  const uint32_t n = LoadU32(p + f.size_field);
  return n < f.header_size || n > kMaxContainerBytes ? 0 : n;
}

Status CheckHeader(const HeaderLayout& f, const void* data, size_t available, Header* out) {
  *out = Header();
  if (data == nullptr)
    return Status::Error(StatusCode::kInvalidArgument, "%s pointer is null", f.noun);
  const uint8_t* p = (const uint8_t*)data;
  const uint32_t size32 = available > kMaxContainerBytes ? kMaxContainerBytes : (uint32_t)available;
  if (size32 < f.header_size)
    return Status::Error(StatusCode::kInvalidBlob, "%s is %u bytes, smaller than the %u-byte header",
                         f.noun, (unsigned)size32, (unsigned)f.header_size);
  const uint32_t magic = LoadU32(p + f.magic_field);
  if (magic != f.magic)
    return Status::Error(StatusCode::kInvalidBlob, "%s header: bad magic 0x%08x (expected '%s')", f.noun,
                         (unsigned)magic, f.magic_text);
  const uint16_t version = LoadU16(p + f.version_field);
  if (version != f.version)
    return Status::Error(StatusCode::kUnsupportedVersion,
                         "%s header: version %u is not supported (this runner reads %u)", f.noun,
                         (unsigned)version, (unsigned)f.version);
  if (LoadU16(p + f.header_size_field) != f.header_size)
    return Status::Error(StatusCode::kInvalidBlob, "%s header: header_size is %u, expected %u", f.noun,
                         (unsigned)LoadU16(p + f.header_size_field), (unsigned)f.header_size);
  const uint32_t size = LoadU32(p + f.size_field);
  if (size < f.header_size || size > kMaxContainerBytes)
    return Status::Error(StatusCode::kInvalidBlob, "%s header: %s %u is out of range", f.noun, f.size_name,
                         (unsigned)size);
  if (size > size32)
    return Status::Error(StatusCode::kInvalidBlob,
                         "%s header: %s %u exceeds the %u bytes given (truncated %s, or the partition "
                         "is too small)",
                         f.noun, f.size_name, (unsigned)size, (unsigned)size32, f.noun);
  if (LoadU32(p + f.flags_field) != 0)
    return Status::Error(StatusCode::kInvalidBlob, "%s header: flags 0x%x are not defined", f.noun,
                         (unsigned)LoadU32(p + f.flags_field));
  if (LoadU32(p + f.reserved_field) != 0)
    return Status::Error(StatusCode::kInvalidBlob, "%s header: reserved field is not 0", f.noun);
  const uint32_t count = LoadU32(p + f.case_count_field);
  if (count < 1 || count > f.max_cases)
    return Status::Error(StatusCode::kInvalidBlob, "%s header: case_count %u is not in 1..%u", f.noun,
                         (unsigned)count, (unsigned)f.max_cases);
  // (count <= max_cases, and max_cases * case_record_size fits 32 bits:
  // each format asserts it.)
  const uint32_t table = LoadU32(p + f.case_table_field);
  if (table < f.header_size || table % 4 != 0 || !RangeOk(table, count * f.case_record_size, size))
    return Status::Error(StatusCode::kInvalidBlob,
                         "%s header: case table at offset %u (%u records) does not fit the %u-byte %s",
                         f.noun, (unsigned)table, (unsigned)count, (unsigned)size, f.noun);
  // The checksum covers everything after the header, so a partially written
  // or stale partition is reported as such rather than as a record error.
  const uint32_t crc = Crc32(p + f.header_size, size - f.header_size);
  if (crc != LoadU32(p + f.crc_field))
    return Status::Error(StatusCode::kInvalidBlob,
                         "%s: CRC-32 0x%08x of bytes [%u, %u) does not match the header's 0x%08x "
                         "(corrupt or partly written %s)",
                         f.noun, (unsigned)crc, (unsigned)f.header_size, (unsigned)size,
                         (unsigned)LoadU32(p + f.crc_field), f.noun);
  out->size = size;
  out->case_count = count;
  out->case_table = table;
  return Status::Ok();
}

}  // namespace container
}  // namespace espnn
