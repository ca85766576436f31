// pocketllm info --backends: what the Vulkan probe finds, as text or JSON.
#include <nlohmann/json.hpp>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_device.h"

namespace pllm {

std::string vulkan_probe(bool as_json) {
  const vk::ProbeReport rep = vk::probe();
  using nlohmann::json;
  json devs = json::array();
  for (const vk::DeviceInfo& d : rep.devices) {
    json heaps = json::array();
    for (const vk::HeapInfo& h : d.heaps) heaps.push_back({{"bytes", h.bytes}, {"device_local", h.device_local}});
    devs.push_back({{"name", d.name},
                    {"type", d.type},
                    {"driver", d.driver},
                    {"api_version", vk::version_string(d.api_version)},
                    {"vendor_id", d.vendor_id},
                    {"device_id", d.device_id},
                    {"fp16", d.fp16},
                    {"int8", d.int8},
                    {"int_dot", d.int_dot},
                    {"subgroup_size", d.subgroup_size},
                    {"subgroup_arithmetic", d.subgroup_arith},
                    {"shared_memory", d.shared_memory},
                    {"max_workgroup_invocations", d.max_invocations},
                    {"max_storage_buffer_range", d.max_storage_range},
                    {"unified_memory", d.uma},
                    {"heaps", heaps}});
  }
  if (as_json) {
    json j = {{"built", true},
              {"loader", rep.loader},
              {"available", !rep.devices.empty()},
              {"instance_version", rep.loader ? vk::version_string(rep.instance_version) : ""},
              {"validation_layer", rep.validation_layer},
              {"devices", devs}};
    if (!rep.error.empty()) j["error"] = rep.error;
    return json{{"vulkan", j}}.dump(2) + "\n";
  }
  std::string s;
  if (rep.devices.empty()) return "vulkan: no device (" + rep.error + ")\n";
  s += "vulkan: instance " + vk::version_string(rep.instance_version) + ", " + std::to_string(rep.devices.size()) +
       " device(s)" + (rep.validation_layer ? ", validation layer installed" : "") + "\n";
  for (size_t i = 0; i < rep.devices.size(); ++i) {
    const vk::DeviceInfo& d = rep.devices[i];
    s += "  [" + std::to_string(i) + "] " + d.name + " (" + d.type + ", Vulkan " + vk::version_string(d.api_version) +
         ", " + d.driver + ")\n";
    s += "      fp16 " + std::string(d.fp16 ? "yes" : "no") + ", int8 " + (d.int8 ? "yes" : "no") + ", int dot " +
         (d.int_dot ? "yes" : "no") + ", subgroup " + std::to_string(d.subgroup_size) +
         (d.subgroup_arith ? " (arithmetic)" : "") + ", shared memory " + std::to_string(d.shared_memory / 1024) +
         " KiB, " + (d.uma ? "unified memory" : "separate memory") + "\n";
    for (const vk::HeapInfo& h : d.heaps)
      s += "      heap " + std::to_string(h.bytes >> 20) + " MiB" + (h.device_local ? " (device local)" : "") + "\n";
  }
  if (!rep.error.empty()) s += "  note: " + rep.error + "\n";
  return s;
}

}  // namespace pllm
