// libFuzzer target: ParseModel on arbitrary bytes.
//
// Finds memory errors (ASan), undefined behaviour (UBSan) and broken
// promises of the parser: a rejection must carry a message, and an accepted
// blob must satisfy the invariants in fuzz_common.h. See docs/fuzzing.md.
#include <stdio.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  espnn_fuzz::AlignedBlob blob(data, size);
  espnn::Model model;
  const espnn::Status s = espnn::ParseModel(blob.data(), blob.size(), &model);
  if (!s.ok()) {
    FUZZ_CHECK(s.message()[0] != '\0');
    FUZZ_CHECK(strlen(s.message()) < espnn::Status::kMessageCapacity);
    FUZZ_CHECK(model.data() == nullptr && model.num_ops() == 0);  // left empty
    return 0;
  }
  espnn_fuzz::CheckAcceptedModel(model, blob.size());
  // Every op's scratch_bytes() is reachable from a parsed model.
  (void)espnn::ComputeMemoryRequirements(model);
  return 0;
}
