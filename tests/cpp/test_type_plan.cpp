// Per-tensor types (quantizer/type_plan.h): llama.cpp's mixes as llama-quantize's
// llama_tensor_get_type states them (dense model, no importance matrix), the output-head
// rule, --pure and --tensor-type over a mix, and the row-length fallbacks of the new types.
// The expectations are written from llama.cpp's rules, not from our table; the Python suite
// (test_quantize.py) also compares whole files with llama-quantize's choices when it is built.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>

#include "quantizer/row_quant.h"
#include "quantizer/type_plan.h"

namespace pllm {
namespace {

using TT = TensorType;

// A model of n_layer blocks, one attn_v and one ffn_down per block.
MixShape dense_shape(int n_layer, int n_gqa) {
  MixShape s;
  for (int i = 0; i < n_layer; ++i) {
    s.ordinal["blk." + std::to_string(i) + ".attn_v.weight"] = i;
    s.ordinal["blk." + std::to_string(i) + ".ffn_down.weight"] = i;
  }
  s.n_attn_v = n_layer;
  s.n_layer = n_layer;
  s.n_gqa = n_gqa;
  return s;
}

TypePlanOptions mix_opts(const char* name, const MixShape& shape) {
  const auto p = parse_quant_preset(name);
  EXPECT_TRUE(p.ok()) << name;
  TypePlanOptions o;
  o.base = p.value().base;
  o.mix = p.value().mix;
  o.shape = shape;
  return o;
}

TT type_of(const std::string& name, const TypePlanOptions& o, uint64_t cols = 1024, bool has_output = true) {
  return choose_tensor_type(name, {cols, 1024}, has_output, o).type;
}

std::string blk(int i, const char* t) { return "blk." + std::to_string(i) + "." + t + ".weight"; }

TEST(TypePlan, PresetNames) {
  struct Case {
    const char* name;
    TT base;
    bool mix;
    uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_MOSTLY_*
  };
  const Case cases[] = {
      {"q2_k", TT::Q2_K, true, 10},     {"Q3_K_M", TT::Q3_K, true, 12},   {"q4_k_s", TT::Q4_K, true, 14},
      {"q4_k_m", TT::Q4_K, true, 15},   {"q5_k_m", TT::Q5_K, true, 17},   {"iq4_nl", TT::IQ4_NL, true, 25},
      {"iq4_xs", TT::IQ4_XS, true, 30}, {"q3_k", TT::Q3_K, false, 11},    {"q5_k", TT::Q5_K, false, 16},
      {"q4_k", TT::Q4_K, false, 14},    {"q4_0", TT::Q4_0, false, 2},     {"f16", TT::F16, false, 1},
  };
  for (const Case& c : cases) {
    const auto p = parse_quant_preset(c.name);
    ASSERT_TRUE(p.ok()) << c.name;
    EXPECT_EQ(p.value().base, c.base) << c.name;
    EXPECT_EQ(p.value().mix != QuantMix::none, c.mix) << c.name;
    EXPECT_EQ(llama_file_type(p.value()), c.file_type) << c.name;
    std::string lower(c.name);
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_EQ(quant_preset_name(p.value()), lower);
  }
  // The new types are single types for --tensor-type too.
  for (const char* t : {"q5_k", "q3_k", "q2_k", "iq4_nl", "iq4_xs"}) {
    const auto r = parse_quant_type(t);
    ASSERT_TRUE(r.ok()) << t;
    EXPECT_TRUE(is_output_type(r.value()));
    EXPECT_EQ(quant_type_name(r.value()), t);
  }
  const auto bad = parse_quant_preset("q3_k_l");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("q4_k_m"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(parse_quant_type("q4_k_m").ok());  // a mix is not one tensor's type
}

TEST(TypePlan, Q4KMGivesMoreBitsToAttnVAndFfnDownOnUseMoreBitsLayers) {
  // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
  const std::set<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  for (const char* mix : {"q4_k_m", "q5_k_m"}) {
    const TypePlanOptions o = mix_opts(mix, dense_shape(32, 4));
    const TT base = o.base;
    for (int i = 0; i < 32; ++i) {
      const TT want = more.count(i) ? TT::Q6_K : base;
      EXPECT_EQ(type_of(blk(i, "attn_v"), o), want) << mix << " layer " << i;
      EXPECT_EQ(type_of(blk(i, "ffn_down"), o), want) << mix << " layer " << i;
      EXPECT_EQ(type_of(blk(i, "attn_q"), o), base) << mix;
      EXPECT_EQ(type_of(blk(i, "attn_output"), o), base) << mix;
      EXPECT_EQ(type_of(blk(i, "ffn_up"), o), base) << mix;
    }
    EXPECT_EQ(type_of("output.weight", o), TT::Q6_K);
  }
}

TEST(TypePlan, Q2KAndQ3KM) {
  for (int gqa : {1, 4}) {
    const TypePlanOptions o = mix_opts("q2_k", dense_shape(16, gqa));
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(type_of(blk(i, "attn_v"), o), gqa >= 4 ? TT::Q4_K : TT::Q3_K);
      EXPECT_EQ(type_of(blk(i, "ffn_down"), o), TT::Q3_K);
      EXPECT_EQ(type_of(blk(i, "attn_output"), o), TT::Q3_K);
      EXPECT_EQ(type_of(blk(i, "attn_k"), o), TT::Q2_K);
      EXPECT_EQ(type_of(blk(i, "ffn_gate"), o), TT::Q2_K);
    }
    EXPECT_EQ(type_of("output.weight", o), TT::Q6_K);
    EXPECT_EQ(type_of("token_embd.weight", o), TT::Q2_K);                                // untied: the base
    EXPECT_EQ(type_of("token_embd.weight", o, 1024, /*has_output=*/false), TT::Q6_K);  // tied: the head
  }
  const TypePlanOptions o = mix_opts("q3_k_m", dense_shape(32, 2));
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(type_of(blk(i, "attn_v"), o), i < 2 ? TT::Q5_K : TT::Q4_K) << i;
    EXPECT_EQ(type_of(blk(i, "ffn_down"), o), i < 32 / 16 ? TT::Q5_K : TT::Q4_K) << i;
    EXPECT_EQ(type_of(blk(i, "attn_output"), o), TT::Q4_K);
    EXPECT_EQ(type_of(blk(i, "ffn_up"), o), TT::Q3_K);
  }
}

TEST(TypePlan, Q4KSAndIq4) {
  const TypePlanOptions s = mix_opts("q4_k_s", dense_shape(24, 2));
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(type_of(blk(i, "attn_v"), s), i < 4 ? TT::Q5_K : TT::Q4_K) << i;
    EXPECT_EQ(type_of(blk(i, "ffn_down"), s), i < 24 / 8 ? TT::Q5_K : TT::Q4_K) << i;
  }
  for (const char* mix : {"iq4_xs", "iq4_nl"}) {
    for (int gqa : {2, 4}) {
      const TypePlanOptions o = mix_opts(mix, dense_shape(24, gqa));
      for (int i = 0; i < 24; ++i) {
        EXPECT_EQ(type_of(blk(i, "attn_v"), o), gqa >= 4 ? TT::Q5_K : o.base) << mix << " " << i;
        EXPECT_EQ(type_of(blk(i, "ffn_down"), o), i < 3 ? TT::Q5_K : o.base) << mix << " " << i;
      }
    }
  }
}

TEST(TypePlan, PureAndTensorTypeOverrideTheMix) {
  TypePlanOptions o = mix_opts("q4_k_m", dense_shape(8, 4));
  o.pure = true;
  EXPECT_EQ(type_of(blk(0, "attn_v"), o), TT::Q4_K);
  EXPECT_EQ(type_of("output.weight", o), TT::Q4_K);
  o.pure = false;
  o.rules.push_back(parse_tensor_type_rule("attn_v=q8_0").value());
  EXPECT_EQ(type_of(blk(0, "attn_v"), o), TT::Q8_0);
  EXPECT_EQ(type_of(blk(0, "ffn_down"), o), TT::Q6_K);
}

TEST(TypePlan, RowLengthFallbacks) {
  // 288 = 9 * 32: no 256-element type fits; 40 fits no 32-element type.
  EXPECT_EQ(fallback_type(TT::Q5_K, 288), TT::Q5_1);
  EXPECT_EQ(fallback_type(TT::Q4_K, 288), TT::Q5_0);
  EXPECT_EQ(fallback_type(TT::Q3_K, 288), TT::Q4_0);
  EXPECT_EQ(fallback_type(TT::Q2_K, 288), TT::Q4_0);
  EXPECT_EQ(fallback_type(TT::IQ4_XS, 288), TT::IQ4_NL);
  EXPECT_EQ(fallback_type(TT::Q6_K, 288), TT::Q8_0);
  for (TT t : {TT::Q5_K, TT::Q3_K, TT::Q2_K, TT::IQ4_XS, TT::IQ4_NL}) {
    EXPECT_EQ(fallback_type(t, 512), t);
    EXPECT_EQ(fallback_type(t, 40), TT::F16);
  }
  // A mix's upgrade falls back too, and is reported as a fallback.
  const TypePlanOptions o = mix_opts("q4_k_m", dense_shape(8, 4));
  const TypeChoice c = choose_tensor_type(blk(0, "ffn_down"), {288, 64}, true, o);
  EXPECT_EQ(c.wanted, TT::Q6_K);
  EXPECT_EQ(c.type, TT::Q8_0);
  EXPECT_TRUE(c.fallback());
}

}  // namespace
}  // namespace pllm
