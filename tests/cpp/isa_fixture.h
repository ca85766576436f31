// The fixture of the tests parametrised over instruction sets: the table of the ISA under
// test (skipped where this CPU or build cannot run it) and the scalar twins' table.
// Header-only (the ARM kernels-only build links no test library).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "kernels/kernels.h"

namespace pllm::testing_isa {

// Every level, for INSTANTIATE_TEST_SUITE_P(..., ::testing::ValuesIn(kAllIsas), IsaParamName()):
// one list, so a new level runs in every ISA-parametrised suite (those this CPU or build cannot
// run skip).
inline constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2,         Isa::avxvnni,  Isa::avx512,
                                   Isa::neon,   Isa::neon_dotprod, Isa::neon_i8mm};

// The level's PLLM_ISA name as the test name suffix (.../avx2).
struct IsaParamName {
  std::string operator()(const ::testing::TestParamInfo<Isa>& info) const { return isa_name(info.param); }
};

class IsaFixture : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    table_ = kernels_for(GetParam());
    scalar_ = kernels_for(Isa::scalar);
    ASSERT_NE(scalar_, nullptr);
    if (!table_) GTEST_SKIP() << isa_name(GetParam()) << " not runnable on this CPU/build";
  }
  const KernelTable* table_ = nullptr;
  const KernelTable* scalar_ = nullptr;
};

}  // namespace pllm::testing_isa
