// XTSP .pte suite: one ExecuTorch program, the method to run, and test
// cases (input tensors, expected output tensors computed on the host by
// ExecuTorch's runtime). Written by python/executorch_espnn/pte_suite.py;
// byte layout in docs/firmware.md (".pte suite format"). This header is the
// source of truth: pte_suite.py reads its constants through the binding
// (host/binding/container_constants.cpp).
//
// Portable C++ with no ExecuTorch dependency: compiled and tested on the
// host and on an emulated Xtensa core (tests/firmware), used on the chip by
// the runner app's .pte mode (src/pte_runner.cpp). Same rules as the XTSB
// bundle parser: byte loads only, 32-bit arithmetic checked before it is
// computed, nothing allocated; the header prefix, its checks and the CRC-32
// are those of every test-rig container (espnn/container_header.h).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/container_header.h"
#include "espnn/status.h"

namespace espnn {
namespace pte {

constexpr uint32_t kMagic = 0x50535458u;  // bytes 'X' 'T' 'S' 'P'
constexpr uint16_t kVersion = 1;

constexpr uint32_t kHeaderSize = 48;
constexpr uint32_t kHdrMagic = 0;          // u32
constexpr uint32_t kHdrVersion = 4;        // u16
constexpr uint32_t kHdrHeaderSize = 6;     // u16, = kHeaderSize
constexpr uint32_t kHdrSuiteSize = 8;      // u32, bytes of the suite (a partition may be larger)
constexpr uint32_t kHdrFlags = 12;         // u32, 0
constexpr uint32_t kHdrPteOffset = 16;     // u32, multiple of kPteAlignment
constexpr uint32_t kHdrPteSize = 20;       // u32, the .pte program
constexpr uint32_t kHdrMethodOffset = 24;  // u32, method name (ASCII, not NUL-terminated)
constexpr uint32_t kHdrMethodSize = 28;    // u32, 1..kMaxMethodBytes
constexpr uint32_t kHdrCaseCount = 32;     // u32, 1..kMaxCases
constexpr uint32_t kHdrCaseTable = 36;     // u32, offset of the case table (multiple of 4)
constexpr uint32_t kHdrCrc32 = 40;         // u32, zlib CRC-32 of bytes [kHeaderSize, suite_size)
constexpr uint32_t kHdrReserved = 44;      // u32, 0

constexpr uint32_t kCaseRecordSize = 32;
constexpr uint32_t kCaseNameOffset = 0;    // u32
constexpr uint32_t kCaseNameSize = 4;      // u32, 1..kMaxNameBytes of [A-Za-z0-9_.-]
constexpr uint32_t kCaseInputsTable = 8;   // u32, offset of input_count tensor records
constexpr uint32_t kCaseInputCount = 12;   // u32, 0..kMaxTensors
constexpr uint32_t kCaseOutputsTable = 16; // u32, offset of output_count tensor records
constexpr uint32_t kCaseOutputCount = 20;  // u32, 1..kMaxTensors
constexpr uint32_t kCaseRuns = 24;         // u32, timed runs; 0 = the runner's default
constexpr uint32_t kCaseFlags = 28;        // u32, 0 or kCaseFlagExpectInvalidArgument

// Case flag: a negative case. Method::execute must refuse the inputs with
// Error::InvalidArgument (e.g. the delegate refusing an input whose dim order
// its payload cannot read); the case has no outputs and is not timed.
constexpr uint32_t kCaseFlagExpectInvalidArgument = 1u;
constexpr uint32_t kTensorRecordSize = 64;
constexpr uint32_t kTensorDtype = 0;       // u32, ExecuTorch ScalarType code (kDtype*)
constexpr uint32_t kTensorRank = 4;        // u32, 0..kMaxRank
constexpr uint32_t kTensorDataOffset = 8;  // u32, multiple of kDataAlignment
constexpr uint32_t kTensorDataSize = 12;   // u32, = product(dims) * element size
constexpr uint32_t kTensorAtol = 16;       // f32 bits; outputs only: 0 = bit-exact
constexpr uint32_t kTensorFlags = 20;      // u32, 0
constexpr uint32_t kTensorReserved0 = 24;  // u32, 0
constexpr uint32_t kTensorReserved1 = 28;  // u32, 0
constexpr uint32_t kTensorDims = 32;       // u32[kMaxRank], unused entries 0

constexpr uint32_t kPteAlignment = 128;  // ExecuTorch's default segment alignment
constexpr uint32_t kDataAlignment = 16;
constexpr uint32_t kMaxCases = 1024;
constexpr uint32_t kMaxNameBytes = 64;
constexpr uint32_t kMaxMethodBytes = 64;
constexpr uint32_t kMaxTensors = 64;
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxRuns = 1000000;

// ExecuTorch ScalarType codes (c10 numbering) a suite may carry.
constexpr uint32_t kDtypeUInt8 = 0, kDtypeInt8 = 1, kDtypeInt16 = 2, kDtypeInt32 = 3,
                   kDtypeInt64 = 4, kDtypeFloat16 = 5, kDtypeFloat32 = 6, kDtypeFloat64 = 7,
                   kDtypeBool = 11;
// Element size in bytes of a dtype code, 0 if the code is not supported.
uint32_t DtypeSize(uint32_t dtype);
const char* DtypeName(uint32_t dtype);  // "float32", ...; "?" if unsupported

struct Tensor {
  uint32_t dtype;
  uint32_t rank;
  uint32_t dims[kMaxRank];
  const uint8_t* data;  // kDataAlignment-aligned relative to the suite start
  uint32_t size;        // bytes
  float atol;           // 0: bit-exact (always 0 for non-float tensors)
  uint32_t elements() const { return dtype_size() ? size / dtype_size() : 0; }
  uint32_t dtype_size() const { return DtypeSize(dtype); }
};

struct Case {
  const char* name;  // not NUL-terminated
  uint32_t name_size;
  uint32_t input_count;
  uint32_t output_count;
  uint32_t runs;
  uint32_t flags;          // kCaseFlag*
  uint32_t inputs_table;   // offsets inside the suite (validated by ParseSuite)
  uint32_t outputs_table;
};

class Suite {
 public:
  uint32_t num_cases() const { return header_.case_count; }
  uint32_t size() const { return header_.size; }
  const uint8_t* pte() const { return base_ + pte_offset_; }
  uint32_t pte_size() const { return pte_size_; }
  // The method name, NUL-terminated (copied at parse time).
  const char* method() const { return method_; }
  Case case_at(uint32_t index) const;  // index < num_cases()
  Tensor input(const Case& c, uint32_t i) const;   // i < c.input_count
  Tensor output(const Case& c, uint32_t i) const;  // i < c.output_count

 private:
  friend Status ParseSuite(const void* data, size_t size, Suite* out);
  Tensor TensorAt(uint32_t offset) const;
  const uint8_t* base_ = nullptr;
  container::Header header_;
  uint32_t pte_offset_ = 0;
  uint32_t pte_size_ = 0;
  char method_[kMaxMethodBytes + 1] = {0};
};

// Validates the whole suite (header, CRC, every case and tensor record)
// before anything runs; on success `out` gives read access. `data` may lie
// anywhere (flash mmap, .rodata); only byte loads are used.
Status ParseSuite(const void* data, size_t size, Suite* out);

// Bytes of the suite from its header (0 if it is not an XTSP header): how
// much of a partition to map.
uint32_t PeekSuiteSize(const void* header, size_t size);

// Result of comparing an output with its expected tensor.
struct Comparison {
  uint32_t first = 0;      // first differing element (valid when diff > 0)
  uint32_t diff = 0;       // number of differing elements
  uint64_t got_bits = 0;   // raw bits of that element (little-endian value)
  uint64_t want_bits = 0;
};

// The suite's rule: every element bit-exact, or, for a float output with
// atol > 0, |got - expected| <= atol (NaN matches only NaN). `got` holds
// expected.size bytes in the expected tensor's dtype and layout.
Comparison CompareOutput(const Tensor& expected, const void* got);

}  // namespace pte
}  // namespace espnn
