// Camera classification on an ESP32-S3 board with ExecuTorch + EspNNBackend:
// capture an RGB565 frame (esp32-camera), resize and normalize it to the
// model's float input (preprocess.cpp), run the .pte's "forward" method -
// the delegated partitions on ESP-NN, anything else on ExecuTorch's CPU
// kernels - and print the top class, once per CONFIG_ESPNN_CAMERA_INTERVAL_MS.
// The int8 quantization of the input happens inside the delegate (its first
// XTS3 op is QUANTIZE), so the app hands ExecuTorch floats.
//
// THIS APP HAS NEVER BEEN BUILT OR RUN: no ESP-IDF, no Xtensa toolchain, no
// ExecuTorch cross-build and no board were available (README.md). The
// ExecuTorch calls follow components/espnn_test_runner/src/pte_runner.cpp at the repository root, which
// is built and run on the host against the executorch wheel's runtime.
#include <stdio.h>
#include <string.h>

#include <new>

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include "camera_pins.h"
#include "esp_camera.h"
#include "esp_heap_caps.h"
#include "esp_log.h"
#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "preprocess.h"
#include "sdkconfig.h"

// EMBED_FILES / EMBED_TXTFILES symbols (main/CMakeLists.txt); the text file
// is NUL-terminated. ESP-IDF gives embedded files no particular alignment.
extern const uint8_t model_pte_start[] asm("_binary_model_pte_start");
extern const uint8_t model_pte_end[] asm("_binary_model_pte_end");
extern const char labels_txt_start[] asm("_binary_labels_txt_start");

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::runtime::DataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::TensorInfo;

const char* TAG = "espnn_camera";

// export_model.py normalizes calibration images the same way (ImageNet statistics).
constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
constexpr size_t kAlignment = 16;  // ExecuTorch and the delegate want 16-byte-aligned data
constexpr size_t kMaxPlannedBuffers = 4;

// The program is already addressable: segments are pointers into it.
class InPlaceLoader final : public DataLoader {
 public:
  InPlaceLoader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  Result<FreeableBuffer> load(size_t offset, size_t size, const SegmentInfo&) const override {
    if (offset > size_ || size > size_ - offset) return Error::InvalidArgument;
    return FreeableBuffer(data_ + offset, size, static_cast<FreeableBuffer::FreeFn>(nullptr));
  }
  Result<size_t> size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

uint8_t* PsramAlloc(size_t bytes) {
  return static_cast<uint8_t*>(heap_caps_aligned_alloc(kAlignment, bytes ? bytes : 1, MALLOC_CAP_SPIRAM));
}

[[noreturn]] void Fatal(const char* what) {
  ESP_LOGE(TAG, "%s", what);
  for (;;) vTaskDelay(portMAX_DELAY);
}

bool InitCamera() {
  camera_config_t config = {};
  config.pin_pwdn = CAM_PIN_PWDN;
  config.pin_reset = CAM_PIN_RESET;
  config.pin_xclk = CAM_PIN_XCLK;
  config.pin_sccb_sda = CAM_PIN_SIOD;
  config.pin_sccb_scl = CAM_PIN_SIOC;
  config.pin_d7 = CAM_PIN_D7;
  config.pin_d6 = CAM_PIN_D6;
  config.pin_d5 = CAM_PIN_D5;
  config.pin_d4 = CAM_PIN_D4;
  config.pin_d3 = CAM_PIN_D3;
  config.pin_d2 = CAM_PIN_D2;
  config.pin_d1 = CAM_PIN_D1;
  config.pin_d0 = CAM_PIN_D0;
  config.pin_vsync = CAM_PIN_VSYNC;
  config.pin_href = CAM_PIN_HREF;
  config.pin_pclk = CAM_PIN_PCLK;
  config.xclk_freq_hz = 20000000;
  config.ledc_timer = LEDC_TIMER_0;
  config.ledc_channel = LEDC_CHANNEL_0;
  config.pixel_format = PIXFORMAT_RGB565;  // raw pixels: no JPEG decode before the resize
  config.frame_size = FRAMESIZE_QVGA;      // 320x240, resized to the model's input
  config.fb_count = 1;
  config.fb_location = CAMERA_FB_IN_PSRAM;
  config.grab_mode = CAMERA_GRAB_LATEST;
  const esp_err_t err = esp_camera_init(&config);
  if (err != ESP_OK) ESP_LOGE(TAG, "esp_camera_init failed: %s", esp_err_to_name(err));
  return err == ESP_OK;
}

// Line `index` of labels.txt (one label per line), or nullptr.
void PrintLabel(int index) {
  const char* p = labels_txt_start;
  for (int i = 0; i < index && p != nullptr; ++i) {
    p = strchr(p, '\n');
    if (p != nullptr) ++p;
  }
  if (p == nullptr || *p == '\0') {
    printf("class %d", index);
    return;
  }
  const char* end = strchr(p, '\n');
  printf("class %d (%.*s)", index, (int)(end ? end - p : (ptrdiff_t)strlen(p)), p);
}

}  // namespace

extern "C" void app_main(void) {
  if (!InitCamera()) Fatal("no camera: check camera_pins.h against the board");
  executorch::runtime::runtime_init();

  // 1. The program, copied to aligned PSRAM (the delegate reads its weights
  //    in place from there: CONFIG_ESPNN_WEIGHTS_IN_PLACE).
  const size_t pte_size = (size_t)(model_pte_end - model_pte_start);
  uint8_t* pte = PsramAlloc(pte_size);
  if (pte == nullptr) Fatal("cannot allocate PSRAM for the .pte");
  memcpy(pte, model_pte_start, pte_size);
  static InPlaceLoader loader(pte, pte_size);
  static Result<Program> program = Program::load(&loader);
  if (!program.ok()) Fatal("Program::load failed (was the .pte written by the same ExecuTorch version?)");

  // 2. What the method takes: one float tensor [1, 3, H, W].
  Result<MethodMeta> meta = program->method_meta("forward");
  if (!meta.ok() || meta->num_inputs() != 1) Fatal("the .pte has no one-input method 'forward'");
  Result<TensorInfo> in_info = meta->input_tensor_meta(0);
  if (!in_info.ok() || in_info->scalar_type() != ScalarType::Float || in_info->sizes().size() != 4 ||
      in_info->sizes()[0] != 1 || in_info->sizes()[1] != 3)
    Fatal("the model must take one float [1, 3, H, W] image");
  const int height = in_info->sizes()[2], width = in_info->sizes()[3];

  // 3. Memory: the AOT memory plan's buffers and ExecuTorch's two pools, in PSRAM.
  Span<uint8_t> planned[kMaxPlannedBuffers];
  const size_t n_planned = meta->num_memory_planned_buffers();
  if (n_planned > kMaxPlannedBuffers) Fatal("too many planned buffers");
  for (size_t i = 0; i < n_planned; ++i) {
    const size_t bytes = (size_t)meta->memory_planned_buffer_size(i).get();
    uint8_t* p = PsramAlloc(bytes);
    if (p == nullptr) Fatal("cannot allocate a planned buffer");
    planned[i] = Span<uint8_t>(p, bytes);
  }
  const uint32_t method_pool_bytes = CONFIG_ESPNN_CAMERA_METHOD_POOL_KB * 1024u;
  const uint32_t temp_pool_bytes = CONFIG_ESPNN_CAMERA_TEMP_POOL_KB * 1024u;
  uint8_t* method_pool = PsramAlloc(method_pool_bytes);
  uint8_t* temp_pool = PsramAlloc(temp_pool_bytes);
  if (method_pool == nullptr || temp_pool == nullptr) Fatal("cannot allocate the ExecuTorch pools");
  static MemoryAllocator method_allocator(method_pool_bytes, method_pool);
  static MemoryAllocator temp_allocator(temp_pool_bytes, temp_pool);
  static HierarchicalAllocator planned_memory({planned, n_planned});
  static MemoryManager memory(&method_allocator, &planned_memory, &temp_allocator);
  static Result<Method> method = program->load_method("forward", &memory);
  if (!method.ok()) Fatal("load_method failed (method pool too small? see CONFIG_ESPNN_CAMERA_METHOD_POOL_KB)");

  // 4. The input tensor over our own buffer (set_input copies it into the plan).
  float* input = reinterpret_cast<float*>(PsramAlloc(sizeof(float) * 3u * (size_t)height * (size_t)width));
  if (input == nullptr) Fatal("cannot allocate the input buffer");
  static TensorImpl::SizesType sizes[4] = {1, 3, height, width};
  static TensorImpl::DimOrderType dim_order[4] = {0, 1, 2, 3};
  static TensorImpl::StridesType strides[4] = {3 * height * width, height * width, width, 1};
  static TensorImpl impl(ScalarType::Float, 4, sizes, input, dim_order, strides);
  ESP_LOGI(TAG, "model: %u-byte .pte, input [1, 3, %d, %d]", (unsigned)pte_size, height, width);

  for (;;) {
    camera_fb_t* fb = esp_camera_fb_get();
    if (fb == nullptr || fb->format != PIXFORMAT_RGB565) {
      ESP_LOGW(TAG, "no RGB565 frame");
      if (fb != nullptr) esp_camera_fb_return(fb);
      vTaskDelay(pdMS_TO_TICKS(100));
      continue;
    }
    const int64_t t0 = esp_timer_get_time();
    espnn_camera_rgb565_to_input(fb->buf, (int)fb->width, (int)fb->height, input, width, height, kMean, kStd);
    esp_camera_fb_return(fb);
    const int64_t t1 = esp_timer_get_time();

    Error err = method->set_input(EValue(Tensor(&impl)), 0);
    if (err == Error::Ok) err = method->execute();
    const int64_t t2 = esp_timer_get_time();
    if (err != Error::Ok || !method->get_output(0).isTensor()) {
      ESP_LOGE(TAG, "inference failed: %s", executorch::runtime::to_string(err));
    } else {
      const Tensor out = method->get_output(0).toTensor();
      const float* scores = out.const_data_ptr<float>();
      int best = 0;
      for (int i = 1; i < (int)out.numel(); ++i)
        if (scores[i] > scores[best]) best = i;
      PrintLabel(best);
      printf(" score %.3f  preprocess %lld us  inference %lld us\n", (double)scores[best],
             (long long)(t1 - t0), (long long)(t2 - t1));
    }
    vTaskDelay(pdMS_TO_TICKS(CONFIG_ESPNN_CAMERA_INTERVAL_MS));
  }
}
