// What the test rig's two containers, XTSB bundles (espnn/bundle.h) and XTSP
// .pte suites (espnn/pte_suite.h), have in common, stated once: the zlib
// CRC-32 over everything after the header, the fixed header prefix (magic,
// version, header size, total size, flags, case count and table, CRC,
// reserved; each format says where each field lies) with its checks and
// messages, the size peek that decides how much of a partition to map, and
// the character set of case names. What differs - the magic, the record
// layouts, the payloads a record points to - stays with each format's
// parser, which passes its HeaderLayout here.
//
// Same discipline as the parsers: byte loads only (a container may lie at
// any address), 32-bit arithmetic checked before it is computed.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/status.h"

namespace espnn {
namespace container {

// Largest container either format accepts: sizes fit int32 with room for
// an offset computed from them.
constexpr uint32_t kMaxContainerBytes = 0x7FFFFFFFu;

// Where one format keeps the shared header fields (byte offsets in its
// header), and the names its messages use.
struct HeaderLayout {
  const char* noun;        // "bundle", "suite": how messages name the container
  const char* magic_text;  // "XTSB": the magic as its four characters
  const char* size_name;   // "bundle_size": the total-size field's name
  uint32_t magic;
  uint16_t version;
  uint32_t header_size;
  uint32_t magic_field, version_field, header_size_field, size_field, flags_field, case_count_field,
      case_table_field, crc_field, reserved_field;  // u16 for version/header size, else u32
  uint32_t case_record_size;
  uint32_t max_cases;
};

// The header fields a format's parser goes on from.
struct Header {
  uint32_t size = 0;  // bytes of the container (what `available` may exceed: a partition)
  uint32_t case_count = 0;
  uint32_t case_table = 0;
};

// Checks the shared header prefix of `data` and the CRC-32 of its bytes
// [header_size, size): magic, version, header size, total size within
// `available` (which may be larger: a flash partition), zero flags and
// reserved field, 1..max_cases case records on a 4-byte boundary after the
// header and inside the container.
Status CheckHeader(const HeaderLayout& layout, const void* data, size_t available, Header* out);

// The container's size from its header, or 0 if the bytes do not start
// with a header of this layout (used to map just the container's part of a
// partition).
uint32_t PeekSize(const HeaderLayout& layout, const void* header, size_t available);

// CRC-32 as zlib.crc32 computes it (reflected, polynomial 0xEDB88320);
// pass the previous result as `crc` to continue a running checksum.
uint32_t Crc32(const uint8_t* data, uint32_t size, uint32_t crc = 0);

// Case names are keys of result lines: [A-Za-z0-9_.-] only, so a name is
// one token of a line.
bool CaseNameCharOk(uint8_t c);

}  // namespace container
}  // namespace espnn
