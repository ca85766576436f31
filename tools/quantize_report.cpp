// Output of `pocketllm quantize` (see quantize_report.h).
#include "quantize_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <vector>

namespace cli {
namespace {

double mib(uint64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }


}  // namespace

std::vector<const pllm::SensitivityEntry*> by_kl(const pllm::SensitivityReport& rep) {
  std::vector<const pllm::SensitivityEntry*> v;
  for (const auto& e : rep.entries) v.push_back(&e);
  std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->kl() > b->kl(); });
  return v;
}

Progress::Progress() : tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::draw(const char* what, int64_t done, int64_t total, const std::string& detail) {
  if (!tty_ || total <= 0) return;
  const int width = 30, fill = int(double(done) / double(total) * width);
  std::fprintf(stderr, "\r%s [%s%s] %lld/%lld %-40.40s", what, std::string(size_t(fill), '=').c_str(),
               std::string(size_t(width - fill), ' ').c_str(), static_cast<long long>(done),
               static_cast<long long>(total), detail.c_str());
  std::fflush(stderr);
  open_ = true;
}

void Progress::done() {
  if (open_) std::fprintf(stderr, "\r%*s\r", 100, "");
  open_ = false;
}

std::string base_name(const std::string& path) {
  const size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

void print_summary(const pllm::QuantizeReport& rep, const std::string& in, uint64_t in_bytes, const std::string& out,
                   const pllm::QuantPreset& type, pllm::QuantMethod method, const pllm::ActStats* stats) {
  std::printf("quantize: %s -> %s (type %s, method %s", in.c_str(), out.c_str(), pllm::quant_preset_name(type).c_str(),
              pllm::quant_method_name(method));
  if (method == pllm::QuantMethod::act && stats)
    std::printf(", calibration %s, %llu tokens", stats->source.c_str(), static_cast<unsigned long long>(stats->n_tokens));
  std::printf(")\n");
  struct Row {
    int count = 0;
    uint64_t elements = 0, bytes = 0;
  };
  std::map<std::string, Row> by_type;
  for (const auto& t : rep.tensors) {
    Row& r = by_type[t.choice.quantized ? pllm::quant_type_name(t.choice.type) : "f32 (1-D)"];
    ++r.count;
    r.elements += t.n_elements;
    r.bytes += t.bytes;
  }
  std::printf("  %-10s %8s %12s %10s %8s\n", "type", "tensors", "elements", "MiB", "bpw");
  for (const auto& [name, r] : by_type)
    std::printf("  %-10s %8d %12llu %10.2f %8.3f\n", name.c_str(), r.count, static_cast<unsigned long long>(r.elements),
                mib(r.bytes), r.elements ? 8.0 * double(r.bytes) / double(r.elements) : 0.0);
  std::printf("2-D weights: %.2f M elements, %.2f MiB, %.3f bits per weight\n", double(rep.weight_elements()) / 1e6,
              mib(rep.weight_bytes()), rep.weight_bpw());
  std::printf("file: %.2f MiB (input %.2f MiB)\n", mib(rep.file_bytes), mib(in_bytes));
  // Fallbacks grouped by (wanted type, written type, row length), each with its count and
  // the first few names.
  std::map<std::tuple<std::string, std::string, uint64_t>, std::vector<std::string>> fallbacks;
  int n_unweighted = 0;
  for (const auto& t : rep.tensors) {
    if (t.choice.quantized && t.choice.fallback())
      fallbacks[{pllm::quant_type_name(t.choice.wanted), pllm::quant_type_name(t.choice.type), t.dims[0]}].push_back(
          t.name);
    if (method == pllm::QuantMethod::act && t.choice.quantized && !t.weighted) ++n_unweighted;
  }
  if (fallbacks.empty()) std::printf("fallbacks: none\n");
  for (const auto& [key, names] : fallbacks) {
    const auto& [wanted, got, cols] = key;
    std::string list;
    for (size_t i = 0; i < names.size() && i < 4; ++i) list += (i ? ", " : "") + names[i];
    if (names.size() > 4) list += ", ... (" + std::to_string(names.size() - 4) + " more)";
    std::printf("fallback: %zu tensor(s) %s -> %s (row length %llu is not a multiple of the %s block): %s\n",
                names.size(), wanted.c_str(), got.c_str(), static_cast<unsigned long long>(cols), wanted.c_str(),
                list.c_str());
  }
  if (n_unweighted > 0)
    std::printf("act: %d tensor(s) without activation statistics (not fed by an activation) used mse\n", n_unweighted);
  std::printf("time: %.1f s\n", rep.seconds);
}


void print_sensitivity(const pllm::SensitivityReport& rep, pllm::QuantMethod method) {
  std::printf("sensitivity: mean KL(input || input with one tensor quantised, %s) over %lld tokens\n",
              pllm::quant_method_name(method), static_cast<long long>(rep.tokens));
  std::printf("  %-4s %-32s %-6s %12s %12s\n", "rank", "tensor", "type", "KL", "bytes");
  int rank = 0;
  for (const auto* e : by_kl(rep))
    std::printf("  %-4d %-32s %-6s %12.4e %12llu\n", ++rank, e->name.c_str(), pllm::quant_type_name(e->type()).c_str(),
                e->kl(), static_cast<unsigned long long>(e->bytes()));
}

void print_plan(const pllm::SensitivityReport& rep, const pllm::BpwPlan& plan, double target_bpw) {
  std::printf("plan for --target-bpw %.3f: %.3f bits per weight, predicted KL %.4e (sum of per-tensor KLs)\n",
              target_bpw, plan.bpw(), plan.predicted_kl);
  std::map<std::string, int> per_type;
  int n = 0;
  for (size_t i = 0; i < rep.entries.size(); ++i) {
    const auto& e = rep.entries[i];
    const auto& c = e.candidates[plan.choice[i]];
    ++per_type[pllm::quant_type_name(c.type)];
    if (plan.choice[i] == 0) continue;
    const long long diff = static_cast<long long>(c.bytes) - static_cast<long long>(e.bytes());
    std::printf("  %-32s %-6s -> %-6s KL %.4e -> %.4e (predicted), %+lld bytes\n", e.name.c_str(),
                pllm::quant_type_name(e.type()).c_str(), pllm::quant_type_name(c.type).c_str(), e.kl(), c.kl, diff);
    ++n;
  }
  if (n == 0) std::printf("  every tensor stays at its base type\n");
  std::string counts;
  for (const auto& [type, count] : per_type) counts += (counts.empty() ? "" : ", ") + type + " " + std::to_string(count);
  std::printf("plan types: %s\n", counts.c_str());
}

}  // namespace cli
