// Loads one method of a .pte into ExecuTorch's runtime (libexecutorch.so of
// the executorch wheel) the way an embedded runner does — FileDataLoader,
// Program, fixed pools for the method allocator and the planned buffers —
// fills its inputs with a deterministic pattern and runs it. Shared by the
// native delegate checks in host/tools/ (et_delegate_check, et_threads_check).
//
// Everything that allocates (loading, pools, input tensors) happens in
// Load(); SetInputs() copies the inputs in, Execute() is Method::execute()
// alone.
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include "espnn/pte_check.h"
#include "et_test_support.h"

namespace espnn_test {

namespace et = ::executorch::runtime;

class PteRunner {
 public:
  // Pool for the method allocator, which ExecuTorch also hands to delegates
  // as their runtime allocator (arena, scratch, handle).
  static constexpr size_t kMethodPoolBytes = 8u << 20;
  // Scratch memory CPU kernels may ask for during execute().
  static constexpr size_t kTempPoolBytes = 1u << 20;

  // Returns an empty string on success, else what failed.
  std::string Load(const char* path, et::EventTracer* tracer = nullptr, const char* method = "forward") {
    auto loader = executorch::extension::FileDataLoader::from(path);
    if (!loader.ok()) return Fail("cannot open", path, loader.error());
    loader_.reset(new executorch::extension::FileDataLoader(std::move(loader.get())));
    // As every loader of the project: the device's .pte check first, then
    // ExecuTorch's full verification (espnn/pte_check.h says why both).
    {
      auto size = loader_->size();
      if (!size.ok()) return Fail("cannot size", path, size.error());
      auto whole = loader_->load(0, size.get(), et::DataLoader::SegmentInfo(et::DataLoader::SegmentInfo::Type::Program));
      if (!whole.ok()) return Fail("cannot read", path, whole.error());
      const espnn::Status checked = espnn::pte::CheckProgram(whole->data(), whole->size());
      if (!checked.ok()) return std::string(path) + ": " + checked.message();
    }
    auto program = et::Program::load(loader_.get(), et::Program::Verification::InternalConsistency);
    if (!program.ok()) return Fail("Program::load failed for", path, program.error());
    program_.reset(new et::Program(std::move(program.get())));
    auto meta = program_->method_meta(method);
    if (!meta.ok()) return Fail("no method in", path, meta.error());
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
      planned_storage_.emplace_back(static_cast<size_t>(meta->memory_planned_buffer_size(i).get()));
      planned_spans_.emplace_back(planned_storage_.back().data(), planned_storage_.back().size());
    }
    method_pool_.resize(kMethodPoolBytes);
    method_allocator_.reset(new et::MemoryAllocator((uint32_t)method_pool_.size(), method_pool_.data()));
    planned_.reset(new et::HierarchicalAllocator({planned_spans_.data(), planned_spans_.size()}));
    temp_pool_.resize(kTempPoolBytes);
    temp_allocator_.reset(new et::MemoryAllocator((uint32_t)temp_pool_.size(), temp_pool_.data()));
    memory_.reset(new et::MemoryManager(method_allocator_.get(), planned_.get(), temp_allocator_.get()));
    auto m = program_->load_method(method, memory_.get(), tracer);
    if (!m.ok()) return Fail("load_method failed for", path, m.error());
    method_.emplace(std::move(m.get()));
    // Inputs: a fixed pattern per element, in the input's own dtype.
    for (size_t i = 0; i < method_->inputs_size(); ++i) {
      auto info = meta->input_tensor_meta(i);
      if (!info.ok()) return Fail("non-tensor input in", path, info.error());
      inputs_.emplace_back(new Input(info.get(), (uint32_t)i));
    }
    const et::Error e = SetInputs();
    if (e != et::Error::Ok) return Fail("set_input failed for", path, e);
    return "";
  }

  // Copies the inputs in again: a memory-planned input buffer may be reused
  // for intermediate values, so every run starts with set_input (as
  // ExecuTorch's own runners do).
  et::Error SetInputs() {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const et::Error e = method_->set_input(et::EValue(inputs_[i]->tensor->tensor()), i);
      if (e != et::Error::Ok) return e;
    }
    return et::Error::Ok;
  }

  et::Error Execute() { return method_->execute(); }

  // Concatenated bytes of every tensor output (after Execute()).
  std::vector<uint8_t> OutputBytes() const {
    std::vector<uint8_t> out;
    for (size_t i = 0; i < method_->outputs_size(); ++i) {
      const et::EValue& v = method_->get_output(i);
      if (!v.isTensor()) continue;
      const auto& t = v.toTensor();
      const uint8_t* p = static_cast<const uint8_t*>(t.const_data_ptr());
      out.insert(out.end(), p, p + t.nbytes());
    }
    return out;
  }

 private:
  struct Input {
    Input(const et::TensorInfo& info, uint32_t index) {
      int32_t sizes[OwnedTensor::kMaxRank];
      uint8_t order[OwnedTensor::kMaxRank];
      const int rank = (int)info.sizes().size();
      for (int d = 0; d < rank; ++d) {
        sizes[d] = info.sizes()[d];
        order[d] = info.dim_order()[d];
      }
      data.resize(info.nbytes() + 16);
      void* aligned = data.data() + (16 - reinterpret_cast<uintptr_t>(data.data()) % 16) % 16;
      Fill(info.scalar_type(), aligned, info.nbytes(), index);
      tensor.reset(new OwnedTensor(info.scalar_type(), rank, sizes, order, aligned));
    }
    static void Fill(executorch::aten::ScalarType type, void* p, size_t bytes, uint32_t index) {
      using executorch::aten::ScalarType;
      if (type == ScalarType::Float) {
        float* f = static_cast<float*>(p);
        for (size_t k = 0; k < bytes / 4; ++k) f[k] = sinf(0.37f * (float)k + (float)index);
      } else {
        uint8_t* b = static_cast<uint8_t*>(p);
        for (size_t k = 0; k < bytes; ++k) b[k] = (uint8_t)(k * 29u + index * 7u + 3u);
      }
    }
    std::vector<uint8_t> data;
    std::unique_ptr<OwnedTensor> tensor;
  };

  static std::string Fail(const char* what, const char* path, et::Error e) {
    char buf[512];
    snprintf(buf, sizeof(buf), "%s %s (ExecuTorch error 0x%x)", what, path, (unsigned)e);
    return buf;
  }

  std::unique_ptr<executorch::extension::FileDataLoader> loader_;
  std::unique_ptr<et::Program> program_;
  std::vector<std::vector<uint8_t>> planned_storage_;
  std::vector<et::Span<uint8_t>> planned_spans_;
  std::vector<uint8_t> method_pool_;
  std::unique_ptr<et::MemoryAllocator> method_allocator_;
  std::vector<uint8_t> temp_pool_;
  std::unique_ptr<et::MemoryAllocator> temp_allocator_;
  std::unique_ptr<et::HierarchicalAllocator> planned_;
  std::unique_ptr<et::MemoryManager> memory_;
  std::optional<et::Method> method_;
  std::vector<std::unique_ptr<Input>> inputs_;
};

}  // namespace espnn_test
