// Little-endian field reads for the containers the device parses (XTS3
// models, ExecuTorch .pte programs, the test rig's XTSB bundles and XTSP
// suites), and the range check that must pass before such a read.
//
// Byte loads only: a record in a memory-mapped file may sit at any address,
// and the cores the runtime targets trap on unaligned word loads. Offsets
// and lengths taken from a file are uint32_t and checked with RangeOk before
// anything at them is read, so the same checks hold where size_t is 32 bits.
#pragma once

#include <stdint.h>
#include <string.h>

namespace espnn {
namespace bytes {

inline uint16_t LoadU16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

inline uint32_t LoadU32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

inline uint64_t LoadU64(const uint8_t* p) {
  return (uint64_t)LoadU32(p) | ((uint64_t)LoadU32(p + 4) << 32);
}

// An IEEE-754 float32 stored as its little-endian bit pattern.
inline float LoadF32(const uint8_t* p) {
  const uint32_t bits = LoadU32(p);
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

// True when [offset, offset + length) lies inside [0, limit), computed
// without an overflowing sum.
inline bool RangeOk(uint32_t offset, uint32_t length, uint32_t limit) {
  return offset <= limit && length <= limit - offset;
}

}  // namespace bytes
}  // namespace espnn
