// What `pocketllm quantize` prints: the progress line, the size summary, the sensitivity
// table and the --target-bpw plan.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "quantizer/act_stats.h"
#include "quantizer/bpw_plan.h"
#include "quantizer/quantize_model.h"
#include "quantizer/sensitivity.h"

namespace cli {

// One line on stderr, redrawn in place, only when stderr is a terminal.
class Progress {
 public:
  Progress();
  void draw(const char* what, int64_t done, int64_t total, const std::string& detail);
  void done();

 private:
  bool tty_;
  bool open_ = false;
};

std::string base_name(const std::string& path);

// Per type: tensors, elements, MiB, bpw; the 2-D weights' total and bits per weight; file
// size; every fallback (grouped); tensors the act method had no statistics for; time.
void print_summary(const pllm::QuantizeReport& rep, const std::string& in, uint64_t in_bytes, const std::string& out,
                   const pllm::QuantPreset& type, pllm::QuantMethod method, const pllm::ActStats* stats);

// The report's entries by the base type's measured KL, largest first (ties in file order).
std::vector<const pllm::SensitivityEntry*> by_kl(const pllm::SensitivityReport& rep);

// The entries sorted by KL, largest first, with the base type's measured KL (the JSON
// form is in sensitivity_file.h).
void print_sensitivity(const pllm::SensitivityReport& rep, pllm::QuantMethod method);

// The planned bits per weight, every tensor not at its base type (base -> planned, the
// KLs, the byte difference) and the count of tensors per planned type.
void print_plan(const pllm::SensitivityReport& rep, const pllm::BpwPlan& plan, double target_bpw);

}  // namespace cli
