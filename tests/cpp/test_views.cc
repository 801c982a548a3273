// test_views.cc - storage and allocator reuse, tensor views, the strided loop planner, and the
// shape/indexing/creation ops run through eager dispatch.
#include <gtest/gtest.h>

#include <numeric>

#include "core/allocator.h"
#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/loop.h"
#include "runtime/eager.h"

namespace kiln {
namespace {

// A contiguous float32 tensor holding 0, 1, 2, ...
Tensor Iota(const Shape& shape) {
  Tensor t = Tensor::Empty(shape, DType::Float32);
  std::iota(t.data<float>(), t.data<float>() + t.numel(), 0.0f);
  return t;
}

// The values of any strided float32 tensor in row-major order.
std::vector<float> Values(const Tensor& t) {
  Tensor c = t.Contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

std::vector<int64_t> IntValues(const Tensor& t) {
  Tensor c = t.To(DType::Int64).Contiguous();
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}

ErrorKind KindOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "expected an kiln::Error";
  return ErrorKind::Runtime;
}

// ---- storage and allocator

TEST(Storage, FreedBlocksAreReused) {
  {
    Tensor warm = Tensor::Empty({1000}, DType::Float32);
  }
  AllocatorStats before = GetAllocatorStats();
  {
    Tensor t = Tensor::Empty({1000}, DType::Float32);
  }  // same bucket as the freed block
  AllocatorStats after = GetAllocatorStats();
  EXPECT_EQ(after.system_allocations, before.system_allocations);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.cached_bytes, 4000);
}

TEST(Storage, AlignedAndSharedByViews) {
  Tensor t = Tensor::Empty({3, 5}, DType::Float64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.storage()->data()) % kAlignment, 0u);
  EXPECT_GE(t.storage()->nbytes(), 15 * sizeof(double));
  Tensor v = t.Slice(1, 1, 3, 1);
  EXPECT_TRUE(v.same_storage(t));
  EXPECT_EQ(t.storage().use_count(), 2);
}

TEST(Storage, BorrowedMemoryIsReleasedWithTheLastView) {
  static float buffer[6];
  bool released = false;
  {
    auto storage = Storage::Borrow(buffer, sizeof(buffer), [&] { released = true; });
    Tensor t = Tensor::FromStorage(storage, {2, 3}, {3, 1}, 0, DType::Float32);
    Tensor view = t.Permute({1, 0});
    storage.reset();
    t = Tensor();
    EXPECT_FALSE(released);
  }
  EXPECT_TRUE(released);
}

// ---- views

TEST(Views, PermuteSwapsShapeAndStrides) {
  Tensor t = Iota({2, 3, 4});
  Tensor p = t.Permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_TRUE(p.same_storage(t));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(Values(t.Permute({1, 0, 2}).Select(0, 1).Select(0, 1)),
            (std::vector<float>{16, 17, 18, 19}));
  EXPECT_EQ(KindOf([&] { t.Permute({0, 0, 1}); }), ErrorKind::Value);
  EXPECT_EQ(KindOf([&] { t.Permute({0, 1}); }), ErrorKind::Value);
}

TEST(Views, SliceClampsAndSteps) {
  Tensor t = Iota({10});
  EXPECT_EQ(Values(t.Slice(0, 1, 8, 3)), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(Values(t.Slice(0, -3, 100, 1)), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(t.Slice(0, 5, 2, 1).numel(), 0);
  EXPECT_EQ(t.Slice(0, 1, 8, 3).strides(), (Shape{3}));
  EXPECT_EQ(t.Slice(0, 1, 8, 3).offset(), 1);
  EXPECT_EQ(KindOf([&] { t.Slice(0, 0, 5, 0); }), ErrorKind::Value);
}

TEST(Views, SelectDropsTheAxisAndChecksRange) {
  Tensor t = Iota({3, 4});
  Tensor row = t.Select(0, -1);
  EXPECT_EQ(row.shape(), (Shape{4}));
  EXPECT_EQ(Values(row), (std::vector<float>{8, 9, 10, 11}));
  EXPECT_EQ(Values(t.Select(1, 2)), (std::vector<float>{2, 6, 10}));
  EXPECT_EQ(KindOf([&] { t.Select(0, 3); }), ErrorKind::Index);
}

TEST(Views, ExpandUsesZeroStrides) {
  Tensor t = Iota({3, 1});
  Tensor e = t.Expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(Values(e.Select(0, 1).Select(0, 2)), (std::vector<float>{2, 2, 2, 2}));
  EXPECT_EQ(KindOf([&] { t.Expand({3, 2, 2}); }), ErrorKind::Value);
  EXPECT_EQ(KindOf([&] { t.Expand({4}); }), ErrorKind::Value);
}

TEST(Views, UnsqueezeAndSqueeze) {
  Tensor t = Iota({2, 3});
  Tensor u = t.Unsqueeze(1);
  EXPECT_EQ(u.shape(), (Shape{2, 1, 3}));
  EXPECT_TRUE(u.is_contiguous());
  EXPECT_EQ(t.Unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(u.Squeeze({}).shape(), (Shape{2, 3}));
  EXPECT_EQ(u.Squeeze({-2}).shape(), (Shape{2, 3}));
  EXPECT_EQ(KindOf([&] { u.Squeeze({0}); }), ErrorKind::Value);
  EXPECT_EQ(KindOf([&] { u.Squeeze({3}); }), ErrorKind::Axis);
}

TEST(Views, ViewAsWhenTheLayoutAllows) {
  Tensor t = Iota({4, 6});
  auto flat = t.ViewAs({24});
  ASSERT_TRUE(flat.has_value());
  EXPECT_TRUE(flat->same_storage(t));

  Tensor tt = t.Permute({1, 0});  // (6, 4) with strides (1, 6)
  EXPECT_FALSE(tt.ViewAs({24}).has_value());
  auto split = tt.ViewAs({3, 2, 4});  // splitting one dimension is always possible
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->strides(), (Shape{2, 1, 6}));
  EXPECT_EQ(Values(*split), Values(tt));

  Tensor cols = t.Slice(1, 0, 4, 2);  // (4, 2) with strides (6, 2): rows do not abut
  EXPECT_FALSE(cols.ViewAs({8}).has_value());
  auto rows = cols.ViewAs({2, 2, 2});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(Values(*rows), Values(cols));
  auto with_ones = cols.ViewAs({4, 1, 2, 1});
  ASSERT_TRUE(with_ones.has_value());
  EXPECT_EQ(Values(*with_ones), Values(cols));
  Tensor evens = t.Slice(1, 0, 6, 2);  // (4, 3) with strides (6, 2): one stride-2 run
  auto run = evens.ViewAs({12});
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->strides(), (Shape{2}));

  Tensor inner = t.Slice(0, 1, 3, 1);  // rows 1..2: contiguous, offset 6
  auto merged = inner.ViewAs({12});
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(merged->offset(), 6);
}

TEST(Views, ReshapeCopiesOnlyWhenNeeded) {
  Tensor t = Iota({4, 6});
  EXPECT_TRUE(t.Reshape({-1, 3}).same_storage(t));
  Tensor copied = t.Permute({1, 0}).Reshape({24});
  EXPECT_FALSE(copied.same_storage(t));
  EXPECT_TRUE(copied.is_contiguous());
  EXPECT_EQ(Values(copied)[1], 6.0f);
  EXPECT_EQ(KindOf([&] { t.Reshape({5, -1}); }), ErrorKind::Value);
  EXPECT_EQ(InferReshape({0, 3}, {-1, 3}, "reshape"), (Shape{0, 3}));
  EXPECT_EQ(KindOf([&] { InferReshape({0, 3}, {-1, 0}, "reshape"); }), ErrorKind::Value);
}

TEST(Views, ContiguousCopiesStridedTensors) {
  Tensor t = Iota({2, 3});
  EXPECT_EQ(t.Contiguous().impl(), t.impl());
  Tensor c = t.Permute({1, 0}).Contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(Values(c), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor ones = Tensor::Empty({1, 5, 1}, DType::Float32).AsStrided({1, 5, 1}, {99, 1, 7}, 0);
  EXPECT_TRUE(ones.is_contiguous());  // size-1 dims never matter
}

// The tiled transposed copy (copy.cc): full 16 x 16 tiles go through register transposes, edge
// tiles element by element; a padded column stride, a batch, and 4-byte integers (moved as bits)
// must all land where a plain element loop puts them.
TEST(Views, TransposedCopiesMatchTheElementLoop) {
  for (int64_t rows : {16, 17, 40})
    for (int64_t cols : {16, 33, 64})
      for (DType dtype : {DType::Float32, DType::Int32}) {
        const int64_t stride = rows + 3, batch = 2;
        Tensor stored = Tensor::Empty({batch, cols, stride}, dtype);
        auto* bits = static_cast<uint32_t*>(stored.raw_data());
        for (int64_t i = 0; i < stored.numel(); ++i) bits[i] = uint32_t(i * 2654435761u);
        // Element (b, r, c) at b * cols * stride + r + c * stride: rows step by one.
        const Tensor src = stored.AsStrided({batch, rows, cols}, {cols * stride, 1, stride}, 0);
        const Tensor dst = src.Contiguous();
        ASSERT_TRUE(dst.is_contiguous());
        const auto* got = static_cast<const uint32_t*>(dst.raw_data());
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
              ASSERT_EQ(got[(b * rows + r) * cols + c], bits[b * cols * stride + r + c * stride])
                  << rows << "x" << cols << " " << DTypeName(dtype) << " at " << b << "," << r
                  << "," << c;
      }
}

TEST(Views, NormalizeAxis) {
  EXPECT_EQ(NormalizeAxis(-1, 3, "op"), 2);
  EXPECT_EQ(NormalizeAxis(0, 0, "op"), 0);  // 0-d tensors accept axis 0 and -1
  EXPECT_EQ(KindOf([] { NormalizeAxis(3, 3, "op"); }), ErrorKind::Axis);
}

// ---- the loop planner

TEST(Loop, ContiguousDimsMergeIntoOneRun) {
  Tensor a = Iota({2, 3, 4});
  std::array<Shape, 2> strides{a.strides(), a.strides()};
  std::array<char*, 2> base{nullptr, nullptr};
  auto plan = cpu::PlanLoop<2>(a.shape(), strides, base, {4, 4});
  EXPECT_EQ(plan.shape, (Shape{24}));
  EXPECT_EQ(plan.byte_strides[0], (Shape{4}));
}

TEST(Loop, BroadcastAndTransposedOperandsKeepTheirDims) {
  Tensor out = Iota({3, 4});
  Tensor row = Iota({4});
  Shape bs = cpu::BroadcastStrides(row, out.shape());
  EXPECT_EQ(bs, (Shape{0, 1}));
  std::array<Shape, 2> strides{out.strides(), bs};
  auto plan = cpu::PlanLoop<2>(out.shape(), strides, {nullptr, nullptr}, {4, 4});
  EXPECT_EQ(plan.shape, (Shape{3, 4}));
  EXPECT_EQ(plan.byte_strides[1], (Shape{0, 4}));

  Tensor col = Iota({3, 1});
  EXPECT_EQ(cpu::BroadcastStrides(col, {2, 3, 5}), (Shape{0, 1, 0}));
  EXPECT_EQ(KindOf([&] { cpu::BroadcastStrides(col, {3, 2, 5}); }), ErrorKind::Value);
}

TEST(Loop, SizeOneDimsAreSkippedAndZeroDGivesOneElement) {
  std::array<Shape, 1> strides{Shape{7, 1, 3}};
  auto plan = cpu::PlanLoop<1>({1, 5, 1}, strides, {nullptr}, {8});
  EXPECT_EQ(plan.shape, (Shape{5}));
  EXPECT_EQ(plan.byte_strides[0], (Shape{8}));
  auto scalar = cpu::PlanLoop<1>({}, std::array<Shape, 1>{Shape{}}, {nullptr}, {8});
  EXPECT_EQ(scalar.shape, (Shape{1}));
}

TEST(Loop, RunLoopVisitsEveryElementOnce) {
  Tensor t = Iota({4, 5, 6}).Permute({2, 0, 1}).Slice(0, 0, 6, 2);  // (3, 4, 5) strided
  Tensor out = Tensor::Empty(t.shape(), DType::Float32);
  cpu::CopyInto(t, out);
  std::vector<float> expected;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 5; ++k)
        expected.push_back(static_cast<float>(j * 30 + k * 6 + i * 2));
  EXPECT_EQ(Values(out), expected);
  Tensor as_int = t.To(DType::Int32);
  EXPECT_EQ(as_int.dtype(), DType::Int32);
  EXPECT_EQ(IntValues(as_int)[1], 6);
}

// ---- ops through eager dispatch

TEST(ShapeOps, ViewsShareStorage) {
  Tensor t = Iota({2, 3, 4});
  Tensor tr = CallOp1(OpKind::Transpose, {t}, {Shape{1, 0, 2}});
  EXPECT_TRUE(tr.same_storage(t));
  EXPECT_EQ(tr.shape(), (Shape{3, 2, 4}));
  Tensor sl = CallOp1(OpKind::StridedSlice, {t}, {Shape{1, 0}, Shape{2, 3}, Shape{1, 2}});
  EXPECT_EQ(Values(sl), (std::vector<float>{12, 13, 14, 15, 20, 21, 22, 23}));
  auto parts = CallOp(OpKind::Split, {t}, {int64_t{2}, Shape{1, 3}});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape(), (Shape{2, 3, 3}));
  EXPECT_TRUE(parts[1].same_storage(t));
  Tensor bc = CallOp1(OpKind::BroadcastTo, {Iota({3, 1})}, {Shape{2, -1, 4}});
  EXPECT_EQ(bc.shape(), (Shape{2, 3, 4}));
}

TEST(ShapeOps, ConcatAndAssign) {
  Tensor a = Iota({2, 2});
  Tensor b = Tensor::Empty({2, 1}, DType::Int32);
  cpu::Fill(b, 9);
  Tensor c = CallOp1(OpKind::Concat, {a, b}, {int64_t{1}});
  EXPECT_EQ(c.dtype(), DType::Float32);
  EXPECT_EQ(Values(c), (std::vector<float>{0, 1, 9, 2, 3, 9}));
  EXPECT_EQ(KindOf([&] { CallOp(OpKind::Concat, {a, Iota({3, 3})}, {int64_t{1}}); }),
            ErrorKind::Value);
  uint64_t version = a.impl()->version;
  CallOp(OpKind::Assign, {a.Select(0, 0), ScalarTensor(5, DType::Float64)}, {});
  EXPECT_EQ(Values(a), (std::vector<float>{5, 5, 2, 3}));
  EXPECT_GE(a.impl()->version, version);
}

TEST(IndexingOps, AdvancedIndexPlacement) {
  Tensor t = Iota({2, 3, 4});
  Tensor i = Tensor::Empty({2}, DType::Int64);
  i.data<int64_t>()[0] = 1;
  i.data<int64_t>()[1] = -1;
  // Adjacent axes: B replaces them in place.
  Tensor adj = CallOp1(OpKind::AdvancedIndex, {t, i, i}, {Shape{1, 2}});
  EXPECT_EQ(adj.shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(adj), (std::vector<float>{5, 11, 17, 23}));
  // Separated axes: B goes first.
  Tensor sep = CallOp1(OpKind::AdvancedIndex, {t, i, i}, {Shape{0, 2}});
  EXPECT_EQ(sep.shape(), (Shape{2, 3}));
  EXPECT_EQ(Values(sep), (std::vector<float>{13, 17, 21, 15, 19, 23}));
  Tensor bad = Tensor::Empty({1}, DType::Int64);
  bad.data<int64_t>()[0] = 3;
  EXPECT_EQ(KindOf([&] { CallOp(OpKind::AdvancedIndex, {t, bad}, {Shape{1}}); }), ErrorKind::Index);
}

TEST(IndexingOps, IndexPutAccumulatesDuplicates) {
  Tensor t = Tensor::Empty({3}, DType::Int32);
  cpu::Fill(t, 0);
  Tensor i = Tensor::Empty({3}, DType::Int64);
  i.data<int64_t>()[0] = 0;
  i.data<int64_t>()[1] = 0;
  i.data<int64_t>()[2] = 2;
  CallOp(OpKind::IndexPut, {t, ScalarTensor(2, DType::Int64), i}, {Shape{0}, true});
  EXPECT_EQ(IntValues(t), (std::vector<int64_t>{4, 0, 2}));
}

TEST(IndexingOps, NonZeroAndGather) {
  Tensor t = Iota({2, 3});
  Tensor nz = CallOp1(OpKind::NonZero, {t}, {});
  EXPECT_EQ(nz.shape(), (Shape{5, 2}));
  EXPECT_EQ(IntValues(nz), (std::vector<int64_t>{0, 1, 0, 2, 1, 0, 1, 1, 1, 2}));
  Tensor idx = Tensor::Empty({2}, DType::Int32);
  idx.data<int32_t>()[0] = 2;
  idx.data<int32_t>()[1] = 0;
  Tensor g = CallOp1(OpKind::Gather, {t, idx}, {int64_t{1}});
  EXPECT_EQ(Values(g), (std::vector<float>{2, 0, 5, 3}));
}

TEST(CreationOps, ArangeFillAndSeededRandom) {
  Tensor r = CallOp1(OpKind::Arange, {}, {int64_t{10}, int64_t{0}, int64_t{-3}, DType::Int64});
  EXPECT_EQ(IntValues(r), (std::vector<int64_t>{10, 7, 4, 1}));
  Tensor f = CallOp1(OpKind::Arange, {}, {0.0, 1.0, 0.25, DType::Float32});
  EXPECT_EQ(Values(f), (std::vector<float>{0, 0.25, 0.5, 0.75}));
  Tensor fill = CallOp1(OpKind::Fill, {}, {Shape{2, 2}, 1.5, DType::Float32});
  EXPECT_EQ(Values(fill), (std::vector<float>{1.5, 1.5, 1.5, 1.5}));
  Attrs attrs{Shape{16}, DType::Float32, 0.0, 1.0, int64_t{42}};
  EXPECT_EQ(Values(CallOp1(OpKind::UniformReal, {}, attrs)),
            Values(CallOp1(OpKind::UniformReal, {}, attrs)));
  EXPECT_TRUE(GetOpDef(OpKind::StandardNormal).is_random);
  EXPECT_EQ(KindOf([] { CallOp(OpKind::Arange, {}, {int64_t{0}, int64_t{1}, int64_t{0}}); }),
            ErrorKind::Value);
}

}  // namespace
}  // namespace kiln
