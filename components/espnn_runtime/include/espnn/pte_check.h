// A check of an ExecuTorch program (.pte) BEFORE ExecuTorch's loader sees it.
//
// ExecuTorch 1.5.1 reads some optional flatbuffer fields of a program
// without checking that they are there, and its Python binding aborts the
// process when a log line is not valid UTF-8. Neither is caught by
// `Program::Verification::InternalConsistency`: the flatbuffers Verifier
// checks that every offset, vector and string lies inside the buffer and is
// aligned, but fields of a flatbuffers table are optional unless the schema
// marks them `(required)` (program.fbs marks none), and it does not look at
// string contents. So a corrupted or hostile .pte that passes full
// verification could still make `Program::load_method` dereference null
// (docs/runtime.md, "Known limits", has the upstream report).
//
// CheckProgram closes exactly those gaps, reading the bytes with its own
// bounds checks (it is safe on any input, aligned or not, and needs neither
// ExecuTorch nor flatbuffers). It does NOT replace ExecuTorch's verifier:
// callers still load with Verification::InternalConsistency, which checks
// the structure of everything else. What it requires:
//   - the "ET12" identifier; an extended header ("eh00"), if present, whose
//     program size fits the file;
//   - a method list (Program.execution_plan) whose every method has a name;
//   - per delegate (ExecutionPlan.delegates): a backend id, a processed-data
//     reference whose location is INLINE or SEGMENT and whose index names an
//     existing Program.backend_delegate_data entry (with data) or
//     Program.segments entry, and a key and a value in every compile-spec
//     entry;
//   - printable ASCII in every string ExecuTorch may print while loading or
//     running a method: method names, backend ids, compile-spec keys,
//     operator names and overloads. (UTF-8 would do for the Python binding,
//     but ExecuTorch cuts log lines at 256 bytes, which can split a
//     multi-byte character; these names are identifiers that ExecuTorch's
//     own AOT writes in ASCII: "forward", "EspNNBackend", "aten::add".)
//
// The same function runs on the chip (main/'s .pte runner), in the host
// tools and, through executorch_espnn._native.check_pte, in Python.
#pragma once

#include <stddef.h>

#include "espnn/status.h"

namespace espnn {
namespace pte {

// Ok, or kInvalidBlob with a one-line ASCII message naming the method,
// delegate or field at fault.
Status CheckProgram(const void* data, size_t size);

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF): what Python's decoder accepts.
bool IsUtf8(const void* data, size_t size);

}  // namespace pte
}  // namespace espnn
