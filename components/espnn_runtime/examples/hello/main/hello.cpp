// espnn_runtime hello: the smallest complete use of the component.
// Parses an XTS3 model that is compiled into the app (model_data.h), gives
// it an arena, writes a float input, runs QUANTIZE -> 2x2 average pool on
// ESP-NN -> DEQUANTIZE and prints the four channel means. Expected output:
//
//   espnn hello: ops=3 arena=<n> scratch=<n> out=[0.500 0.750 1.000 1.250]
//
// Everything here is portable C++; tests/firmware builds and runs this very
// file on the host and on an emulated Xtensa core (it has not run on a
// board: see docs/firmware.md in the repository).
#include <stdio.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "espnn/platform.h"
#include "model_data.h"

extern "C" void app_main(void) {
  espnn::Model model;
  espnn::Status s = espnn::ParseModel(kHelloModel, sizeof(kHelloModel), &model);
  if (!s.ok()) {
    printf("espnn hello: model rejected: %s\n", s.message());
    return;
  }
  // Arena and scratch sizes come from the model and the linked ESP-NN
  // build; espnn_pal_malloc returns 16-byte aligned blocks, internal RAM first.
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(model);
  void* arena = espnn_pal_malloc(req.arena_bytes, ESPNN_MEM_INTERNAL_FIRST);
  void* scratch = req.scratch_bytes ? espnn_pal_malloc(req.scratch_bytes, ESPNN_MEM_INTERNAL_FIRST)
                                    : nullptr;
  espnn::Interpreter interp;
  s = interp.Init(&model, arena, req.arena_bytes, scratch, req.scratch_bytes);
  if (s.ok()) {
    // Input [1,2,2,4] NHWC: -1.00, -0.75, ..., 2.75 (arena tensors are
    // 16-byte aligned, so the float view is aligned).
    float* in = (float*)interp.input_data(0);
    for (int i = 0; i < 16; ++i) in[i] = 0.25f * (float)i - 1.0f;
    // A model may leave a float output EXTERNAL (written straight into the
    // caller's buffer, no arena bytes): bind one then. This one does not.
    static float out_buf[4];
    if (interp.output_info(0).flags & espnn::xts3::kTensorFlagExternal)
      s = interp.BindOutput(0, out_buf, sizeof(out_buf));
    if (s.ok()) s = interp.Invoke();
  }
  if (s.ok()) {
    const float* out = (const float*)interp.output_data(0);
    printf("espnn hello: ops=%u arena=%u scratch=%u out=[%.3f %.3f %.3f %.3f]\n",
           (unsigned)model.num_ops(), (unsigned)req.arena_bytes, (unsigned)req.scratch_bytes,
           (double)out[0], (double)out[1], (double)out[2], (double)out[3]);
  } else {
    printf("espnn hello: %s\n", s.message());
  }
  espnn_pal_free(scratch);
  espnn_pal_free(arena);
}
