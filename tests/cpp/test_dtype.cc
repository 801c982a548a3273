// test_dtype.cc - the dtype list, the promotion table, integer range checks, float-to-integer
// conversion and unsigned constants in IR text.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/convert.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

constexpr DType B = DType::Bool, U8 = DType::UInt8, U16 = DType::UInt16, U32 = DType::UInt32,
                U64 = DType::UInt64, I8 = DType::Int8, I16 = DType::Int16, I32 = DType::Int32,
                I64 = DType::Int64, F16 = DType::Float16, BF16 = DType::BFloat16,
                F32 = DType::Float32, F64 = DType::Float64;

const std::vector<DType> kAll = {B, U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16, F32, F64};

TEST(DType, NamesSizesAndKinds) {
  EXPECT_EQ(static_cast<int>(kAll.size()), kNumDTypes);
  for (DType d : kAll) EXPECT_EQ(DTypeFromName(DTypeName(d)), d);
  EXPECT_EQ(ItemSize(U16), 2u);
  EXPECT_EQ(ItemSize(U32), 4u);
  EXPECT_EQ(ItemSize(U64), 8u);
  for (DType d : {U8, U16, U32, U64}) {
    EXPECT_TRUE(IsUnsigned(d) && IsIntegral(d) && !IsSigned(d) && !IsFloating(d)) << DTypeName(d);
  }
  for (DType d : {I8, I64}) EXPECT_TRUE(IsSigned(d) && !IsUnsigned(d));
  EXPECT_FALSE(IsUnsigned(B) || IsSigned(B) || IsIntegral(B));
  // uint16 arithmetic happens in uint32: a product of two uint16 never overflows an int.
  static_assert(std::is_same_v<compute_t<uint16_t>, uint32_t>);
  static_assert(std::is_same_v<compute_t<uint32_t>, uint32_t>);
}

// One row per pair (a, b, a + b), written out rather than derived, so a change to the rules
// shows here as a line to review. docs/type_promotion.md holds the full table.
struct Promotion {
  DType a, b, want;
};
const Promotion kPromotions[] = {
    {U8, U16, U16},  {U16, U32, U32}, {U32, U64, U64}, {U8, U64, U64},   {B, U32, U32},
    {U8, I8, I16},   {U8, I16, I16},  {U8, I64, I64},  {U16, I8, I32},   {U16, I16, I32},
    {U16, I32, I32}, {U16, I64, I64}, {U32, I8, I64},  {U32, I32, I64},  {U32, I64, I64},
    {U64, I8, F64},  {U64, I32, F64}, {U64, I64, F64}, {U64, F16, F16},  {U64, BF16, BF16},
    {U16, F32, F32}, {U32, F16, F16}, {I64, F16, F16}, {F16, BF16, F32}, {I8, I16, I16},
};

TEST(DType, PromotionTable) {
  for (const Promotion& p : kPromotions) {
    EXPECT_EQ(PromoteTypes(p.a, p.b), p.want) << DTypeName(p.a) << " + " << DTypeName(p.b);
    EXPECT_EQ(PromoteTypes(p.b, p.a), p.want) << DTypeName(p.b) << " + " << DTypeName(p.a);
  }
  for (DType a : kAll) {
    EXPECT_EQ(PromoteTypes(a, a), a);
    for (DType b : kAll) EXPECT_EQ(PromoteTypes(a, b), PromoteTypes(b, a));
  }
}

TEST(DType, WeakScalarsKeepTheTensorsCategory) {
  EXPECT_EQ(PromoteWithScalar(U16, I64), U16);
  EXPECT_EQ(PromoteWithScalar(U64, U64), U64);
  EXPECT_EQ(PromoteWithScalar(I32, U64), I32);  // then 2**63 must fit int32: it does not
  EXPECT_EQ(PromoteWithScalar(U32, F64), F32);
  EXPECT_EQ(PromoteWithScalar(B, U64), I64);
}

TEST(DType, IntegerRanges) {
  EXPECT_TRUE(IntFitsDType(65535, U16));
  EXPECT_FALSE(IntFitsDType(65536, U16));
  EXPECT_FALSE(IntFitsDType(-1, U64));
  EXPECT_TRUE(IntFitsDType(std::numeric_limits<int64_t>::max(), U64));
  EXPECT_TRUE(IntFitsDType(std::numeric_limits<int64_t>::min(), I64));
  EXPECT_FALSE(IntFitsDType(-129, I8));
  EXPECT_TRUE(IntFitsDType(-128, I8));
  EXPECT_TRUE(IntFitsDType(std::numeric_limits<int64_t>::max(), F16));  // not an integer type
  EXPECT_TRUE(UIntFitsDType(std::numeric_limits<uint64_t>::max(), U64));
  EXPECT_FALSE(UIntFitsDType(uint64_t{1} << 63, I64));
  EXPECT_FALSE(UIntFitsDType(uint64_t{1} << 32, U32));
  EXPECT_TRUE(UIntFitsDType((uint64_t{1} << 32) - 1, U32));
  EXPECT_THROW(CheckWeakIntFits("add", -1, U32), Error);
  EXPECT_THROW(CheckWeakUIntFits("add", uint64_t{1} << 63, I64), Error);
  EXPECT_NO_THROW(CheckWeakUIntFits("add", uint64_t{1} << 63, F32));
}

TEST(DType, FloatToIntegerIsNumpysWithinInt64AndZeroBeyond) {
  EXPECT_EQ(cpu::Convert<uint8_t>(-1.5), 255);
  EXPECT_EQ(cpu::Convert<uint16_t>(-2.3), 65534);
  EXPECT_EQ(cpu::Convert<uint32_t>(-1.0f), 4294967295u);
  EXPECT_EQ(cpu::Convert<uint64_t>(-1.0), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(cpu::Convert<int8_t>(300.0), 44);
  EXPECT_EQ(cpu::Convert<uint64_t>(0x1p63), uint64_t{1} << 63);
  EXPECT_EQ(cpu::Convert<uint64_t>(0x1p64), 0u);
  EXPECT_EQ(cpu::Convert<int64_t>(std::nan("")), 0);
  EXPECT_EQ(cpu::Convert<uint32_t>(-std::numeric_limits<double>::infinity()), 0u);
  EXPECT_EQ(cpu::Convert<uint16_t>(Half(65504.0f)), 65504);
  EXPECT_EQ(cpu::Convert<double>(std::numeric_limits<uint64_t>::max()), 0x1p64);
}

// A uint64 constant past int64 prints as itself and parses back to the same bits.
TEST(DType, Uint64ConstantsRoundTripThroughIrText) {
  ir::Module m;
  ir::Func& f = m.AddFunc("main");
  ir::Builder b(m, f);
  Tensor value = Tensor::Empty({2}, U64);
  value.data<uint64_t>()[0] = std::numeric_limits<uint64_t>::max();
  value.data<uint64_t>()[1] = uint64_t{1} << 63;
  ir::ValueRef x = b.Param({U64, {2}});
  b.Return({b.Op1(OpKind::Add, {x, b.Const(value)})});
  const std::string text = ir::Print(m);
  EXPECT_NE(text.find("const [18446744073709551615, 9223372036854775808] : u64[2]"),
            std::string::npos)
      << text;
  EXPECT_EQ(ir::Print(ir::Parse(text)), text);

  Tensor one = Tensor::Empty({2}, U64);
  one.data<uint64_t>()[0] = 1;
  one.data<uint64_t>()[1] = 1;
  auto out = kiln::Run(ir::Parse(text), {one});
  EXPECT_EQ(out[0].data<uint64_t>()[0], 0u);  // wraps
  EXPECT_EQ(out[0].data<uint64_t>()[1], (uint64_t{1} << 63) + 1);
}

TEST(DType, IrParserRejectsUnsignedConstantsOutOfRange) {
  for (const char* text : {"func @main() -> (u64[]) {\n  %0 = const [-1] : u64[]\n  return %0\n}\n",
                           "func @main() -> (u64[]) {\n  %0 = const [18446744073709551616] : "
                           "u64[]\n  return %0\n}\n",
                           "func @main() -> (u16[]) {\n  %0 = const [65536] : u16[]\n  return "
                           "%0\n}\n"}) {
    try {
      ir::Parse(text);
      ADD_FAILURE() << "parsed: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln
