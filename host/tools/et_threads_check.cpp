// et_threads_check: concurrent execute() through ExecuTorch's runtime
// (libexecutorch.so of the executorch wheel) with the EspNNBackend delegate.
// Built with -fsanitize=thread by tests/hardening/test_et_threads_tsan.py
// (the runtime, the ESP-NN kernels and the glue instrumented; the wheel's
// libraries are not), which fails on any ThreadSanitizer report.
//
//   et_threads_check [--threads T] [--iterations N] PTE...
//       Serial reference outputs first; then T threads, thread k loading its
//       own instance of program k % P (so with T > P the same program runs
//       in several instances at once, and different programs run side by
//       side), all initialising concurrently, then each executing N times
//       and comparing every output byte with the serial reference. Every
//       delegate call goes through KernelLock (the delegate's mutex).
//   et_threads_check --unsafe-shared-interpreter XTS3
//       Negative control: two threads Invoke ONE espnn::Interpreter without
//       any lock — a real data race on its arena, which ThreadSanitizer must
//       report (shows the instrumented runtime is checked).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <executorch/runtime/platform/runtime.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "et_pte_runner.h"

namespace {

using espnn_test::PteRunner;
namespace et = ::executorch::runtime;

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(m_);
    if (--n_ == 0) {
      cv_.notify_all();
    } else {
      cv_.wait(lock, [this] { return n_ == 0; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_;
};

int UnsafeSharedInterpreter(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return 2;
  std::vector<uint8_t> raw;
  for (int c; (c = fgetc(f)) != EOF;) raw.push_back((uint8_t)c);
  fclose(f);
  void* blob = nullptr;
  if (posix_memalign(&blob, 16, raw.size()) != 0) return 2;
  memcpy(blob, raw.data(), raw.size());
  espnn::Model model;
  if (!espnn::ParseModel(blob, raw.size(), &model).ok()) return 2;
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(model);
  void *arena = nullptr, *scratch = nullptr, *persistent = nullptr;
  if (posix_memalign(&arena, 16, req.arena_bytes ? req.arena_bytes : 16) != 0 ||
      posix_memalign(&scratch, 16, req.scratch_bytes ? req.scratch_bytes : 16) != 0 ||
      posix_memalign(&persistent, 16, req.persistent_bytes ? req.persistent_bytes : 16) != 0)
    return 2;
  espnn::Interpreter interp;
  // The fused regions' descriptions live in `persistent` (Interpreter::Init).
  if (!interp.Init(&model, arena, req.arena_bytes, scratch, req.scratch_bytes, persistent,
                   req.persistent_bytes)
           .ok())
    return 2;
  // EXTERNAL (float) inputs must be bound, or Invoke returns before any op runs.
  std::vector<std::vector<float>> external(interp.num_inputs());
  for (uint32_t i = 0; i < interp.num_inputs(); ++i) {
    const espnn::TensorInfo t = interp.input_info(i);
    if (!(t.flags & espnn::xts3::kTensorFlagExternal)) continue;
    external[i].assign(t.nbytes / sizeof(float), 0.5f);
    if (!interp.BindInput(i, external[i].data(), t.nbytes).ok()) return 2;
  }
  std::vector<std::vector<float>> outputs(interp.num_outputs());
  for (uint32_t i = 0; i < interp.num_outputs(); ++i) {
    const espnn::TensorInfo t = interp.output_info(i);
    if (!(t.flags & espnn::xts3::kTensorFlagExternal)) continue;
    outputs[i].assign(t.nbytes / sizeof(float), 0.0f);
    if (!interp.BindOutput(i, outputs[i].data(), t.nbytes).ok()) return 2;
  }
  auto run = [&interp] {
    for (int i = 0; i < 20; ++i) (void)interp.Invoke();  // no KernelLock: racy by design
  };
  std::thread a(run), b(run);
  a.join();
  b.join();
  free(persistent);
  free(scratch);
  free(arena);
  free(blob);
  printf("unsafe shared interpreter: ran (ThreadSanitizer should have reported a race)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  et::runtime_init();
  int threads = 4, iterations = 50;
  std::vector<const char*> paths;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iterations = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--unsafe-shared-interpreter") && i + 1 < argc) {
      return UnsafeSharedInterpreter(argv[++i]);
    } else {
      paths.push_back(argv[i]);
    }
  }
  if (paths.empty() || threads < 1 || iterations < 1) {
    fprintf(stderr, "usage: et_threads_check [--threads T] [--iterations N] PTE...\n");
    return 2;
  }

  std::vector<std::vector<uint8_t>> reference;
  for (const char* p : paths) {
    PteRunner runner;
    const std::string err = runner.Load(p);
    if (!err.empty() || runner.Execute() != et::Error::Ok) {
      fprintf(stderr, "FAIL: serial run of %s: %s\n", p, err.empty() ? "execute failed" : err.c_str());
      return 1;
    }
    reference.push_back(runner.OutputBytes());
  }

  std::atomic<long> mismatches{0}, failures{0}, executions{0};
  Barrier loaded(threads);
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k) {
    pool.emplace_back([&, k] {
      const size_t prog = (size_t)k % paths.size();
      PteRunner runner;  // this thread's own instance (own Method, own delegate handles)
      const std::string err = runner.Load(paths[prog]);
      loaded.Wait();
      if (!err.empty()) {
        fprintf(stderr, "FAIL: thread %d: %s\n", k, err.c_str());
        ++failures;
        return;
      }
      for (int i = 0; i < iterations; ++i) {
        if (runner.SetInputs() != et::Error::Ok || runner.Execute() != et::Error::Ok) {
          ++failures;
          continue;
        }
        ++executions;
        if (runner.OutputBytes() != reference[prog]) ++mismatches;
      }
    });
  }
  for (auto& t : pool) t.join();
  printf("threads=%d programs=%zu iterations=%d executions=%ld failures=%ld mismatches=%ld\n", threads,
         paths.size(), iterations, executions.load(), failures.load(), mismatches.load());
  return failures == 0 && mismatches == 0 ? 0 : 1;
}
