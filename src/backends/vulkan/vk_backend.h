// The Vulkan backend as the engine sees it: no Vulkan types here, so the runtime builds the
// same with or without the backend (vk_absent.cpp stands in when it is off).
//
// A step runs on the device when the backend can take it (supported_reason() is empty): the
// weights it needs were uploaded, the KV caches are of a type the device mirrors (f32, f16, q8;
// no session-wide window). The device keeps a mirror of each sequence's KV cache and writes
// every new key and value back into the session's KvCache too, so the CPU can take over at
// any step with the same state (device lost, an unsupported step, a prefix-cache import).
#pragma once
#include <memory>
#include <span>
#include <string>

#include "base/result.h"
#include "model/model.h"
#include "model/step.h"

namespace pllm {

struct VulkanOptions {
  int device = -1;                // -1: the best GPU (PLLM_VK_DEVICE overrides)
  bool allow_cpu_device = false;  // accept a CPU Vulkan device such as lavapipe (tests, --backend vulkan)
};

class VulkanBackend {
 public:
  // unsupported (with why) when built without Vulkan, without a loader or a usable device.
  static Result<std::unique_ptr<VulkanBackend>> create(const VulkanOptions& o);
  virtual ~VulkanBackend() = default;
  // "Vulkan: <device name> (<type>, fp16, int dot)".
  virtual std::string describe() const = 0;
  // Why this step must run on the CPU instead, or "" when the device can run it.
  virtual std::string unsupported_reason(const Model& m, std::span<const SeqStep> seqs,
                                         const StepOptions& opt) const = 0;
  // One forward step on the device. On failure nothing of the sequences' state has changed
  // (the caller may run the same step on the CPU).
  virtual Result<void> forward(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt) = 0;
  // The sequence's cache is going away: drop its device mirror.
  virtual void forget(const KvCache* kv) = 0;
  // The device was lost: every later forward fails.
  virtual bool lost() const = 0;
  // Warnings and errors the validation layer reported (PLLM_VK_VALIDATION=1), for tests;
  // -1 when the layer is off.
  virtual int validation_messages() const = 0;
};

// What the probe finds, as JSON (pocketllm info --backends --json) or text.
std::string vulkan_probe(bool json);
// Whether this build has the backend at all.
bool vulkan_built();

}  // namespace pllm
