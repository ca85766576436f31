// What the speculative decoding suites share: the real models with a draft model (the target
// cut to its first layers, written with GgufWriter) and the layers a skip draft leaves out,
// prompts, and drafters made for a session.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/chat_prompt.h"
#include "model/model.h"
#include "real_model.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace pllm::spec_test {

inline std::string models_dir() {
  const char* env = std::getenv("POCKETLLM_MODELS");
  return env && *env ? env : std::string(test::kSourceDir) + "/models";
}

inline std::shared_ptr<const Model> load(const std::string& path) {
  auto m = Model::load(path, false);
  return m.ok() ? std::shared_ptr<const Model>(m.value()) : nullptr;
}

// The target's first n_keep layers as a GGUF of its own (same tokenizer and head): a draft model.
inline std::string cut_model(const std::string& path, int n_keep, const std::string& out) {
  auto f = GgufFile::open(path);
  if (!f.ok()) return "";
  GgufWriter w;
  w.copy_metadata(**f);
  auto arch_r = (*f)->get_string("general.architecture");
  if (!arch_r.ok()) return "";
  const std::string arch = *arch_r;
  w.set_u32(arch + ".block_count", uint32_t(n_keep));
  for (const TensorInfo& t : (*f)->tensors()) {
    if (t.name.starts_with("blk.") && std::stoi(t.name.substr(4)) >= n_keep) continue;
    if (!w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes)).ok()) return "";
  }
  return w.write(out).ok() ? out : "";
}

struct Fixture {
  std::shared_ptr<const Model> target, draft;
  std::vector<int> skip;  // layers a skip draft leaves out
};

// SmolLM2 (30 layers; draft: its first 8) and Gemma 3 270M (18 layers; draft: its first 6),
// loaded once per binary.
inline const Fixture* fixture(const std::string& name) {
  static std::map<std::string, Fixture> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second.target ? &it->second : nullptr;
  Fixture& fx = cache[name];
  const bool smol = name == "smollm2";
  const std::string path = smol ? real_model_path() : models_dir() + "/gemma-3-270m-Q4_K_M.gguf";
  if (access(path.c_str(), R_OK) != 0) return nullptr;
  fx.target = load(path);
  const std::string cut = cut_model(path, smol ? 8 : 6, testing::TempDir() + "/draft_" + name + ".gguf");
  fx.draft = cut.empty() ? nullptr : load(cut);
  fx.skip = smol ? std::vector<int>{14, 16, 18, 20, 22, 24} : std::vector<int>{7, 9, 11};
  return fx.target && fx.draft ? &fx : nullptr;
}

// A user turn rendered with the model's chat template, as tokens (the assistant's turn next).
inline std::vector<int32_t> encode(const Model& m, const std::string& user) {
  auto text = apply_chat_template(m, {ChatMessage("user", user)}, /*add_generation_prompt=*/true);
  EXPECT_TRUE(text.ok());
  if (!text.ok()) return {};
  auto r = m.tokenizer().encode(*text, /*add_special=*/true, /*parse_special=*/true);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : std::vector<int32_t>{};
}

inline const char* kPrompts[] = {
    "Rewrite this sentence without changing it: The quick brown fox jumps over the lazy dog near the river bank.",
    "Write a Python function that adds two numbers and returns the sum.",
    "What is the capital of France? Answer in one sentence.",
};

inline std::unique_ptr<Drafter> drafter(DraftKind kind, const Fixture& fx, Session& s) {
  DraftSpec spec;
  spec.kind = kind;
  spec.model = fx.draft;
  spec.skip_layers = fx.skip;
  auto d = make_drafter(spec, s);
  EXPECT_TRUE(d.ok()) << d.error().message;
  return d.ok() ? std::move(*d) : nullptr;
}

}  // namespace pllm::spec_test
