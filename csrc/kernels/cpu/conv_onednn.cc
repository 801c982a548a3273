// conv_onednn.cc - convolution and its gradients on cached oneDNN primitives (conv_onednn.h).
#include "kernels/cpu/conv_onednn.h"

#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/derived_cache.h"
#include "kernels/cpu/onednn.h"

namespace kiln::cpu {
namespace {

// Plain-layout memory descriptors of a convolution's src (nchw), weights (oihw, or goihw with
// groups) and dst (nchw), all of element type `dt` (f32, or bf16 on the native path).
struct ConvDescs {
  dnnl::memory::desc src, weights, dst;
};

ConvDescs MakeConvDescs(const ConvShape& s, dnnl::memory::data_type dt) {
  using dnnl::memory;
  ConvDescs d;
  d.src = memory::desc({s.n, s.c, s.h, s.w}, dt, memory::format_tag::nchw);
  d.dst = memory::desc({s.n, s.o, s.oh, s.ow}, dt, memory::format_tag::nchw);
  d.weights = s.groups == 1 ? memory::desc({s.o, s.c, s.kh, s.kw}, dt, memory::format_tag::oihw)
                            : memory::desc({s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw},
                                           dt, memory::format_tag::goihw);
  return d;
}

PrimitiveKey ConvKey(PrimitiveTag tag, const ConvShape& s, bool has_bias,
                     dnnl::memory::data_type dt) {
  const auto kind = static_cast<int64_t>(tag), type = static_cast<int64_t>(dt);
  PrimitiveKey key{kind,        s.n,           s.c,           s.h,      s.w,
                   s.o,         s.kh,          s.kw,          s.groups, has_bias,
                   s.stride[0], s.stride[1],   s.pad[0],      s.pad[1], s.pad[2],
                   s.pad[3],    s.dilation[0], s.dilation[1], type};
  return key;
}

// oneDNN counts dilation from 0 (no gap) where PyTorch and MindSpore count from 1.
dnnl::memory::dims OnednnDilation(const ConvShape& s) {
  return {s.dilation[0] - 1, s.dilation[1] - 1};
}
dnnl::memory::dims PadBegin(const ConvShape& s) { return {s.pad[0], s.pad[2]}; }
dnnl::memory::dims PadEnd(const ConvShape& s) { return {s.pad[1], s.pad[3]}; }

dnnl::convolution_forward::primitive_desc ForwardPd(const ConvShape& s, const ConvDescs& d,
                                                    const dnnl::memory::desc& bias,
                                                    dnnl::prop_kind prop) {
  return dnnl::convolution_forward::primitive_desc(
      OnednnEngine(), prop, dnnl::algorithm::convolution_direct, d.src, d.weights, bias, d.dst,
      {s.stride[0], s.stride[1]}, OnednnDilation(s), PadBegin(s), PadEnd(s), ConcurrentAttr());
}

// The same descriptors with format `any`: the primitive picks its layouts. With
// `few_channels_last`, an input of fewer than 8 channels, which oneDNN would keep plain (nchw),
// is asked for channels-last: ResNet-18's first layer (3 -> 64, 7x7, stride 2, batch 16) ran
// forward in 67 ms on nchw and 20 ms on nhwc (AVX2, 2 threads); its weight gradient ran the
// other way, 27 against 36 ms, so that primitive leaves the choice to oneDNN.
ConvDescs AnyDescs(const ConvDescs& plain, bool few_channels_last) {
  using tag = dnnl::memory::format_tag;
  const auto& src = plain.src;
  const tag src_tag = few_channels_last && src.get_dims()[1] < 8 ? tag::nhwc : tag::any;
  return ConvDescs{
      dnnl::memory::desc(src.get_dims(), src.get_data_type(), src_tag),
      dnnl::memory::desc(plain.weights.get_dims(), plain.weights.get_data_type(), tag::any),
      dnnl::memory::desc(plain.dst.get_dims(), plain.dst.get_data_type(), tag::any)};
}

// Whether oneDNN's plain-layout float32 convolution (im2col + GEMM) is as fast as its own layouts
// with the reorders around them: a 1x1 at unit stride is a GEMM as it stands (8 x 32 -> 64 at
// 56x56: 0.77 against 1.04 ms), and a unit-stride kernel over fewer than 8 input channels has
// a small im2col (8 x 3 -> 16, 3x3 at 224x224: 3.8 against 4.1 ms). Not grouped ones: a
// depthwise 3x3 (16 x 64 at 56x56) ran 8.8 ms on the plain layouts and 4.2 in oneDNN's own.
bool PlainIsAsFast(const ConvShape& s) {
  const bool unit_stride = s.stride[0] == 1 && s.stride[1] == 1;
  const bool pointwise =
      s.kh == 1 && s.kw == 1 && s.pad[0] == 0 && s.pad[1] == 0 && s.pad[2] == 0 && s.pad[3] == 0;
  return unit_stride && (pointwise || (s.groups == 1 && s.c < 8));
}

// The layouts a forward or input-gradient convolution runs in. bf16 lets oneDNN choose: its
// AMX / AVX512-BF16 kernels (brgconv) want blocked or channels-last layouts and otherwise fall
// back to a gemm-based convolution several times slower. float32 mostly does too, reorders
// included: ResNet-18 (batch 16, 2 threads) ran its forward in 380-400 ms instead of 490-520 and
// its training step in 1360-1370 instead of 1560-1610 on AVX2 (Zen 3), and in 296-315 instead of
// 359 and 931-1017 instead of 1120 on AVX-512 (Zen 4), where plain layouts had been kept
// unmeasured until then.
ConvDescs PrimitiveDescs(const ConvShape& s, const ConvDescs& plain) {
  const bool bf16 = plain.src.get_data_type() == dnnl::memory::data_type::bf16;
  return bf16 || !PlainIsAsFast(s) ? AnyDescs(plain, true) : plain;
}

std::shared_ptr<dnnl::reorder> MakeReorder(const dnnl::memory::desc& from,
                                           const dnnl::memory::desc& to) {
  if (from == to) return nullptr;
  auto& engine = OnednnEngine();
  return std::make_shared<dnnl::reorder>(
      dnnl::reorder::primitive_desc(engine, from, engine, to, ConcurrentAttr()));
}

// The copies in a primitive's own layouts that one call needs, on buffers from kiln's
// allocator, which keeps freed blocks: oneDNN's memory objects map large buffers fresh from the
// system on every call and fault them in (measured: 50 ms to reorder the 51 MB output gradient
// of ResNet-18's first layer into a new buffer, 4 ms into a reused one).
class LayoutCopies {
 public:
  // An operand in the primitive's layout: the tensor's own memory, or a reordered copy.
  dnnl::memory In(const std::shared_ptr<dnnl::reorder>& reorder, const dnnl::memory::desc& plain,
                  const dnnl::memory::desc& chosen, const Tensor& t) {
    dnnl::memory m(plain, OnednnEngine(), t.raw_data());
    if (!reorder) return m;
    dnnl::memory copy = Fresh(chosen);
    OnednnExecute(*reorder, {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, copy}});
    return copy;
  }

  // A weight in the primitive's layout: a copy kept on its storage (derived_cache.h) while the
  // same bytes come back unwritten, as in a model run for inference; a fresh one otherwise (a
  // weight being trained changes between calls and is never kept).
  dnnl::memory Weights(const std::shared_ptr<dnnl::reorder>& reorder,
                       const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen,
                       const Tensor& w) {
    if (!reorder) return In(reorder, plain, chosen, w);
    auto kept = std::static_pointer_cast<Tensor>(
        DerivedLookup(w, {kConvWeightsTag, LayoutHash(chosen)}, [&] {
          auto copy = std::make_shared<Tensor>(
              Tensor::Empty({static_cast<int64_t>(chosen.get_size())}, DType::UInt8));
          dnnl::memory from(plain, OnednnEngine(), w.raw_data());
          dnnl::memory to(chosen, OnednnEngine(), copy->raw_data());
          OnednnExecute(*reorder, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
          return copy;
        }));
    if (!kept) return In(reorder, plain, chosen, w);
    buffers_.push_back(*kept);  // alive through the call, even if the cache drops it meanwhile
    return dnnl::memory(chosen, OnednnEngine(), kept->raw_data());
  }

  // A result: written in place when the layouts agree, else into a copy reordered afterwards
  // (Finish).
  dnnl::memory Out(const std::shared_ptr<dnnl::reorder>& reorder, const dnnl::memory& plain,
                   const dnnl::memory::desc& chosen) {
    return reorder ? Fresh(chosen) : plain;
  }

  static void Finish(const std::shared_ptr<dnnl::reorder>& reorder, const dnnl::memory& made,
                     const dnnl::memory& plain) {
    if (reorder) OnednnExecute(*reorder, {{DNNL_ARG_FROM, made}, {DNNL_ARG_TO, plain}});
  }

 private:
  dnnl::memory Fresh(const dnnl::memory::desc& desc) {
    buffers_.push_back(Tensor::Empty({static_cast<int64_t>(desc.get_size())}, DType::UInt8));
    return dnnl::memory(desc, OnednnEngine(), buffers_.back().raw_data());
  }

  std::vector<Tensor> buffers_;  // alive until the call's primitives have run
};

// A primitive with the plain layouts of its tensors, those it runs in, and the reorders
// between them (null where they agree): src/weights/dst in or out as the primitive reads or
// writes them.
template <typename Prim>
struct ConvEntryOf {
  Prim prim;
  ConvDescs plain, chosen;
  std::shared_ptr<dnnl::reorder> src, weights, dst;
};

// Backward primitives take a forward_training primitive_desc as their hint.
using ConvBackwardDataEntry = ConvEntryOf<dnnl::convolution_backward_data>;

// On plain nchw/oihw oneDNN runs backward-weights with its gemm implementation, 1.7x (dense
// 3x3) to 15x (depthwise) slower than its blocked jit kernels here (AVX-512, best of 15 runs).
// So this primitive picks its own layouts (format any) in every dtype and kiln reorders around
// it; the reorders are memory-bound and cheap next to the convolution.
using ConvBackwardWeightsEntry = ConvEntryOf<dnnl::convolution_backward_weights>;

struct ConvForward : ConvEntryOf<dnnl::convolution_forward> {
  dnnl::memory::desc bias;
};

}  // namespace

dnnl::memory::data_type OnednnConvType(std::initializer_list<DType> dtypes) {
  if (!OnednnHasNativeBF16()) return dnnl::memory::data_type::f32;
  for (DType d : dtypes)
    if (d != DType::BFloat16) return dnnl::memory::data_type::f32;
  return dnnl::memory::data_type::bf16;
}

// out = conv(x, w) + bias, contiguous; x, w and out of element type dt, the bias float32.
void OnednnConv(const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& bias,
                const Tensor& out, dnnl::memory::data_type dt) {
  using dnnl::memory;
  const bool has_bias = bias.defined();
  auto e = CachedPrimitive<ConvForward>(ConvKey(PrimitiveTag::Conv, s, has_bias, dt), [&] {
    ConvDescs plain = MakeConvDescs(s, dt);
    memory::desc bias_md = has_bias
                               ? memory::desc({s.o}, memory::data_type::f32, memory::format_tag::a)
                               : memory::desc();
    auto pd = ForwardPd(s, PrimitiveDescs(s, plain), bias_md, dnnl::prop_kind::forward_inference);
    ConvDescs chosen{pd.src_desc(), pd.weights_desc(), pd.dst_desc()};
    ConvForward f{{dnnl::convolution_forward(pd), plain, chosen, MakeReorder(plain.src, chosen.src),
                   MakeReorder(plain.weights, chosen.weights), MakeReorder(chosen.dst, plain.dst)},
                  bias_md};
    return f;
  });
  auto& engine = OnednnEngine();
  LayoutCopies copies;
  memory out_plain(e->plain.dst, engine, out.raw_data());
  memory dst = copies.Out(e->dst, out_plain, e->chosen.dst);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, copies.In(e->src, e->plain.src, e->chosen.src, x)},
      {DNNL_ARG_WEIGHTS, copies.Weights(e->weights, e->plain.weights, e->chosen.weights, w)},
      {DNNL_ARG_DST, dst}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, memory(e->bias, engine, bias.raw_data()));
  OnednnExecute(e->prim, args);
  LayoutCopies::Finish(e->dst, dst, out_plain);
}

// dx = conv's input gradient from dy and w, all of element type dt and contiguous.
void OnednnConvBackwardData(const ConvShape& s, const Tensor& dy, const Tensor& w, const Tensor& dx,
                            dnnl::memory::data_type dt) {
  using dnnl::memory;
  auto e = CachedPrimitive<ConvBackwardDataEntry>(
      ConvKey(PrimitiveTag::ConvBackwardData, s, false, dt), [&] {
        ConvDescs plain = MakeConvDescs(s, dt), d = PrimitiveDescs(s, plain);
        auto hint = ForwardPd(s, d, memory::desc(), dnnl::prop_kind::forward_training);
        dnnl::convolution_backward_data::primitive_desc pd(
            OnednnEngine(), dnnl::algorithm::convolution_direct, d.src, d.weights, d.dst,
            {s.stride[0], s.stride[1]}, OnednnDilation(s), PadBegin(s), PadEnd(s), hint,
            ConcurrentAttr());
        ConvDescs chosen{pd.diff_src_desc(), pd.weights_desc(), pd.diff_dst_desc()};
        return ConvBackwardDataEntry{dnnl::convolution_backward_data(pd),
                                     plain,
                                     chosen,
                                     MakeReorder(chosen.src, plain.src),
                                     MakeReorder(plain.weights, chosen.weights),
                                     MakeReorder(plain.dst, chosen.dst)};
      });
  LayoutCopies copies;
  memory dx_plain(e->plain.src, OnednnEngine(), dx.raw_data());
  memory diff_src = copies.Out(e->src, dx_plain, e->chosen.src);
  OnednnExecute(e->prim,
                {{DNNL_ARG_DIFF_DST, copies.In(e->dst, e->plain.dst, e->chosen.dst, dy)},
                 {DNNL_ARG_WEIGHTS, copies.In(e->weights, e->plain.weights, e->chosen.weights, w)},
                 {DNNL_ARG_DIFF_SRC, diff_src}});
  LayoutCopies::Finish(e->src, diff_src, dx_plain);
}

// dw = conv's weight gradient from dy and x, all of element type dt and contiguous.
void OnednnConvBackwardWeights(const ConvShape& s, const Tensor& dy, const Tensor& x,
                               const Tensor& dw, dnnl::memory::data_type dt) {
  using dnnl::memory;
  auto e = CachedPrimitive<ConvBackwardWeightsEntry>(
      ConvKey(PrimitiveTag::ConvBackwardWeights, s, false, dt), [&] {
        ConvDescs plain = MakeConvDescs(s, dt), any = AnyDescs(plain, false);
        auto hint = ForwardPd(s, any, memory::desc(), dnnl::prop_kind::forward_training);
        dnnl::convolution_backward_weights::primitive_desc pd(
            OnednnEngine(), dnnl::algorithm::convolution_direct, any.src, any.weights, any.dst,
            {s.stride[0], s.stride[1]}, OnednnDilation(s), PadBegin(s), PadEnd(s), hint,
            ConcurrentAttr());
        ConvDescs chosen{pd.src_desc(), pd.diff_weights_desc(), pd.diff_dst_desc()};
        return ConvBackwardWeightsEntry{dnnl::convolution_backward_weights(pd),
                                        plain,
                                        chosen,
                                        MakeReorder(plain.src, chosen.src),
                                        MakeReorder(chosen.weights, plain.weights),
                                        MakeReorder(plain.dst, chosen.dst)};
      });
  LayoutCopies copies;
  memory dw_plain(e->plain.weights, OnednnEngine(), dw.raw_data());
  memory diff_weights = copies.Out(e->weights, dw_plain, e->chosen.weights);
  OnednnExecute(e->prim, {{DNNL_ARG_SRC, copies.In(e->src, e->plain.src, e->chosen.src, x)},
                          {DNNL_ARG_DIFF_DST, copies.In(e->dst, e->plain.dst, e->chosen.dst, dy)},
                          {DNNL_ARG_DIFF_WEIGHTS, diff_weights}});
  LayoutCopies::Finish(e->weights, diff_weights, dw_plain);
}

}  // namespace kiln::cpu
