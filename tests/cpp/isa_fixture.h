// The fixture of the tests parametrised over instruction sets: the table of the ISA under
// test (skipped where this CPU or build cannot run it) and the scalar twins' table.
// Header-only (the ARM kernels-only build links no test library).
#pragma once
#include <gtest/gtest.h>

#include "kernels/kernels.h"

namespace pllm::testing_isa {

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
