// XTSB test bundles: XTS3 models with their inputs and the outputs the host
// runtime computed for them, in one little-endian container that the board
// runner (main/) reads from a flash partition or from the app image.
// python/executorch_espnn/bundle.py writes them with the constants below
// (through the binding); docs/firmware.md section "Bundle format" describes
// the bytes.
//
// The header prefix, its checks and the CRC-32 are those of every test-rig
// container (espnn/container_header.h). ParseBundle follows the XTS3
// parser's discipline: every field is read with
// byte loads (the container may sit at any address), every offset, size and
// count is checked with overflow-safe 32-bit arithmetic before it is used,
// and nothing is allocated. Models themselves are checked later, by
// ParseModel, when their case runs.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/container_header.h"
#include "espnn/status.h"

namespace espnn {
namespace bundle {

constexpr uint32_t kMagic = 0x42535458u;  // bytes 'X' 'T' 'S' 'B'
constexpr uint16_t kVersion = 1;

// Header (32 bytes).
constexpr uint32_t kHeaderSize = 32;
constexpr uint32_t kHdrMagic = 0;        // u32
constexpr uint32_t kHdrVersion = 4;      // u16
constexpr uint32_t kHdrHeaderSize = 6;   // u16, = kHeaderSize
constexpr uint32_t kHdrBundleSize = 8;   // u32, bytes of the bundle (a partition may be larger)
constexpr uint32_t kHdrFlags = 12;       // u32, 0
constexpr uint32_t kHdrCaseCount = 16;   // u32, 1..kMaxCases
constexpr uint32_t kHdrCaseTable = 20;   // u32, offset of the case table (multiple of 4)
constexpr uint32_t kHdrCrc32 = 24;       // u32, CRC-32 (zlib's) of bytes [kHeaderSize, bundle_size)
constexpr uint32_t kHdrReserved = 28;    // u32, 0

// Case record (48 bytes). Payload offsets are from the start of the bundle.
constexpr uint32_t kCaseRecordSize = 48;
constexpr uint32_t kCaseNameOffset = 0;      // u32
constexpr uint32_t kCaseNameSize = 4;        // u32, 1..kMaxNameBytes of [A-Za-z0-9_.-]
constexpr uint32_t kCaseModelOffset = 8;     // u32, multiple of kPayloadAlignment
constexpr uint32_t kCaseModelSize = 12;      // u32, the XTS3 blob
constexpr uint32_t kCaseInputsOffset = 16;   // u32, multiple of kPayloadAlignment
constexpr uint32_t kCaseInputsSize = 20;     // u32, graph inputs' bytes, concatenated in order
constexpr uint32_t kCaseExpectedOffset = 24; // u32, multiple of kPayloadAlignment
constexpr uint32_t kCaseExpectedSize = 28;   // u32, graph outputs' bytes, concatenated in order
constexpr uint32_t kCaseRuns = 32;           // u32, timed runs; 0 = the runner's default
constexpr uint32_t kCaseFlags = 36;          // u32, 0
constexpr uint32_t kCaseReserved0 = 40;      // u32, 0
constexpr uint32_t kCaseReserved1 = 44;      // u32, 0

constexpr uint32_t kPayloadAlignment = 16;  // = xts3::kBlobAlignment
constexpr uint32_t kMaxCases = 1024;
constexpr uint32_t kMaxNameBytes = 64;
constexpr uint32_t kMaxRuns = 1000000;
constexpr uint32_t kMaxBundleBytes = 0x7FFFFFFFu;

// One test case: views into the bundle's bytes.
struct Case {
  const char* name;  // not NUL-terminated
  uint32_t name_size;
  const uint8_t* model;
  uint32_t model_size;
  const uint8_t* inputs;
  uint32_t inputs_size;
  const uint8_t* expected;
  uint32_t expected_size;
  uint32_t runs;
};

class Bundle {
 public:
  uint32_t num_cases() const { return header_.case_count; }
  uint32_t size() const { return header_.size; }
  const uint8_t* data() const { return base_; }
  Case case_at(uint32_t index) const;  // index < num_cases()

 private:
  friend Status ParseBundle(const void* data, size_t size, Bundle* out);
  const uint8_t* base_ = nullptr;
  container::Header header_;
};

// Validates the container (header, CRC, every case record and name). `data`
// may have any alignment; `size` may exceed the bundle (a flash partition).
Status ParseBundle(const void* data, size_t size, Bundle* out);

// bundle_size from a header, or 0 if the bytes do not start with a version-1
// XTSB header (used to map just the bundle's part of a partition).
uint32_t PeekBundleSize(const void* header, size_t size);

}  // namespace bundle
}  // namespace espnn
