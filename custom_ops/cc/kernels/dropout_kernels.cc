// CPU kernel for SeededDropout: one pass over x, mask generated on the fly from (seed, index).
//
// Keras's dropout is four element-wise ops forward (RandomUniform, GreaterEqual, Mul, SelectV2)
// and two more backward, with a [same shape] float mask kept alive between them; in the
// Transformer's step they were about a tenth of the op time. Here the keep decision for flat
// index i is the top 32 bits of SplitMix64(seed + (i + 1) * gamma) compared with rate * 2^32, so
// the backward pass regenerates the same mask from the seed instead of storing it.
//
// Elements are split over TF's intra-op threads in blocks; the mask depends only on (seed, i), so
// results do not depend on the split. float and bfloat16 (widened to float, narrowed back with
// Eigen's round-to-nearest-even) have 16-lane AVX-512 (F, DQ: its 64-bit multiply) and 8-lane
// AVX2 loops (the 64-bit multiply built from three 32-bit ones), chosen per call by
// ChooseSimdIsa: TF_NMT_DROPOUT_ISA=scalar|avx2|avx512 caps the width. half, and CPUs with
// neither, take a scalar loop. Every loop gives bit-identical results.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/util/work_sharder.h"
#include "bf16_simd.h"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMix1 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kMix2 = 0x94D049BB133111EBull;
constexpr int64_t kBlock = 8192;  // elements per work unit (a multiple of 16)
constexpr char kIsaEnv[] = "TF_NMT_DROPOUT_ISA";  // caps the vector width (ChooseSimdIsa)

// Top 32 bits of SplitMix64's output for counter seed + (i + 1) * gamma.
inline uint32_t Hash(uint64_t seed, int64_t i) {
  uint64_t z = seed + static_cast<uint64_t>(i + 1) * kGamma;
  z = (z ^ (z >> 30)) * kMix1;
  z = (z ^ (z >> 27)) * kMix2;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

template <typename T>
void DropScalar(const T* x, T* y, int64_t begin, int64_t end, uint64_t seed, uint32_t threshold,
                float scale) {
  for (int64_t i = begin; i < end; ++i) {
    y[i] = Hash(seed, i) >= threshold ? static_cast<T>(static_cast<float>(x[i]) * scale)
                                      : static_cast<T>(0.0f);
  }
}

#if TF_NMT_BF16_SIMD_AVAILABLE
// z -> SplitMix64's mix of z, top 32 bits left in the low half of each 64-bit lane.
TF_NMT_AVX512 inline __m512i Mix(__m512i z) {
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64(kMix1));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64(kMix2));
  return _mm512_srli_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 31)), 32);
}

// The keep masks of counters begin + 1, begin + 2, ... 16 at a time, as two 8-lane vectors of
// z = seed + counter * gamma; the same decisions as Hash(seed, i) >= threshold.
struct KeepMasks {
  __m512i z_lo, z_hi, thr, step16;

  TF_NMT_AVX512 KeepMasks(uint64_t seed, int64_t begin, uint32_t threshold) {
    const __m512i lanes = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1);
    z_lo = _mm512_add_epi64(
        _mm512_set1_epi64(static_cast<int64_t>(seed + static_cast<uint64_t>(begin) * kGamma)),
        _mm512_mullo_epi64(lanes, _mm512_set1_epi64(static_cast<int64_t>(kGamma))));
    z_hi = _mm512_add_epi64(z_lo, _mm512_set1_epi64(static_cast<int64_t>(8 * kGamma)));
    thr = _mm512_set1_epi64(threshold);
    step16 = _mm512_set1_epi64(static_cast<int64_t>(16 * kGamma));
  }

  // The mask of the next 16 elements (bit j: keep element j), then advance by 16.
  TF_NMT_AVX512 __mmask16 Next() {
    const __mmask8 k_lo = _mm512_cmpge_epu64_mask(Mix(z_lo), thr);
    const __mmask8 k_hi = _mm512_cmpge_epu64_mask(Mix(z_hi), thr);
    z_lo = _mm512_add_epi64(z_lo, step16);
    z_hi = _mm512_add_epi64(z_hi, step16);
    return static_cast<__mmask16>(k_lo | (static_cast<unsigned>(k_hi) << 8));
  }
};

// Same results as DropScalar<float>.
TF_NMT_AVX512 void DropSimd(const float* x, float* y, int64_t begin, int64_t end,
                                  uint64_t seed, uint32_t threshold, float scale) {
  KeepMasks masks(seed, begin, threshold);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t i = begin; i < end; i += 16) {
    const __mmask16 keep = masks.Next();
    const int64_t left = end - i;
    if (left >= 16) {
      _mm512_storeu_ps(y + i, _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(x + i), vscale));
    } else {
      const __mmask16 valid = static_cast<__mmask16>((1u << left) - 1u);
      const __m512 v = _mm512_maskz_loadu_ps(valid, x + i);
      _mm512_mask_storeu_ps(y + i, valid, _mm512_maskz_mul_ps(keep, v, vscale));
    }
  }
}

// Same results as DropScalar<Eigen::bfloat16>: the mask as for float, each kept value widened
// to float (exact), scaled in float and rounded back; the last partial 16 take the scalar loop.
TF_NMT_AVX512 void DropSimd(const Eigen::bfloat16* x, Eigen::bfloat16* y, int64_t begin,
                                  int64_t end, uint64_t seed, uint32_t threshold, float scale) {
  KeepMasks masks(seed, begin, threshold);
  const __m512 vscale = _mm512_set1_ps(scale);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(x);
  uint16_t* dst = reinterpret_cast<uint16_t*>(y);
  int64_t i = begin;
  for (; end - i >= 16; i += 16) {
    const __mmask16 keep = masks.Next();
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m512 v = WidenBf16(h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        NarrowToBf16(_mm512_maskz_mul_ps(keep, v, vscale)));
  }
  DropScalar(x, y, i, end, seed, threshold, scale);
}

// ---- 8 lanes (AVX2): four 64-bit hash lanes per vector ----

// a * b mod 2^64 per 64-bit lane, for a constant b given as its 32-bit halves: AVX2 multiplies
// only 32 x 32 -> 64 bits, so a_lo * b_lo + ((a_hi * b_lo + a_lo * b_hi) << 32); a_hi * b_hi
// falls beyond bit 63.
TF_NMT_AVX2 inline __m256i MulLo64(__m256i a, __m256i b_lo, __m256i b_hi) {
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b_lo),
                                         _mm256_mul_epu32(a, b_hi));
  return _mm256_add_epi64(_mm256_mul_epu32(a, b_lo), _mm256_slli_epi64(cross, 32));
}

// KeepMasks on 8 lanes: the keep decisions of counters begin + 1, ... 8 at a time, as a float
// mask (all ones: keep) from two 4-lane vectors of z = seed + counter * gamma.
struct KeepMasks8 {
  __m256i z_lo, z_hi, step8, thr_less1, m1_lo, m1_hi, m2_lo, m2_hi;

  TF_NMT_AVX2 KeepMasks8(uint64_t seed, int64_t begin, uint32_t threshold) {
    const uint64_t z0 = seed + static_cast<uint64_t>(begin) * kGamma;
    auto at = [&](int k) { return static_cast<int64_t>(z0 + static_cast<uint64_t>(k) * kGamma); };
    z_lo = _mm256_setr_epi64x(at(1), at(2), at(3), at(4));
    z_hi = _mm256_setr_epi64x(at(5), at(6), at(7), at(8));
    step8 = _mm256_set1_epi64x(static_cast<int64_t>(8 * kGamma));
    // The hashes are below 2^32, so a signed compare with threshold - 1 (>= -1) is exact.
    thr_less1 = _mm256_set1_epi64x(static_cast<int64_t>(threshold) - 1);
    m1_lo = _mm256_set1_epi64x(static_cast<int64_t>(kMix1 & 0xFFFFFFFFull));
    m1_hi = _mm256_set1_epi64x(static_cast<int64_t>(kMix1 >> 32));
    m2_lo = _mm256_set1_epi64x(static_cast<int64_t>(kMix2 & 0xFFFFFFFFull));
    m2_hi = _mm256_set1_epi64x(static_cast<int64_t>(kMix2 >> 32));
  }

  // SplitMix64's mix of z, its top 32 bits in the low half of each lane.
  TF_NMT_AVX2 __m256i Mix(__m256i z) const {
    z = MulLo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), m1_lo, m1_hi);
    z = MulLo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), m2_lo, m2_hi);
    return _mm256_srli_epi64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 31)), 32);
  }

  // The mask of the next 8 elements, then advance by 8.
  TF_NMT_AVX2 __m256 Next() {
    const __m256 k_lo = _mm256_castsi256_ps(_mm256_cmpgt_epi64(Mix(z_lo), thr_less1));
    const __m256 k_hi = _mm256_castsi256_ps(_mm256_cmpgt_epi64(Mix(z_hi), thr_less1));
    z_lo = _mm256_add_epi64(z_lo, step8);
    z_hi = _mm256_add_epi64(z_hi, step8);
    // The low 32 bits of each 64-bit result: per 128-bit half (lo0 lo1 hi0 hi1 | lo2 lo3 hi2 hi3),
    // then the 64-bit pairs reordered to lo0..lo3 hi0..hi3.
    const __m256 packed = _mm256_shuffle_ps(k_lo, k_hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castsi256_ps(
        _mm256_permute4x64_epi64(_mm256_castps_si256(packed), _MM_SHUFFLE(3, 1, 2, 0)));
  }
};

// Same results as DropScalar for float (T = float) and bfloat16 (T = uint16_t bits): kept values
// scaled in float, dropped ones +0; a partial last 8 goes through LoadAsFloat8/StoreFromFloat8.
template <typename T>
TF_NMT_AVX2 void DropAvx2(const T* x, T* y, int64_t begin, int64_t end, uint64_t seed,
                          uint32_t threshold, float scale) {
  KeepMasks8 masks(seed, begin, threshold);
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t i = begin; i < end; i += 8) {
    const __m256 keep = masks.Next();
    const int64_t left = end - i;
    StoreFromFloat8(y + i, _mm256_and_ps(_mm256_mul_ps(LoadAsFloat8(x + i, left), vscale), keep),
                    left);
  }
}
#endif

// The widest loop there is for T (float, bfloat16) within `isa`, else the scalar one.
template <typename T>
void DropRange(const T* x, T* y, int64_t begin, int64_t end, uint64_t seed, uint32_t threshold,
               float scale, SimdIsa isa) {
#if TF_NMT_BF16_SIMD_AVAILABLE
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Eigen::bfloat16>) {
    if (isa == SimdIsa::kAvx512) {
      DropSimd(x, y, begin, end, seed, threshold, scale);
      return;
    }
    if (isa == SimdIsa::kAvx2) {
      using Bits = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;
      DropAvx2(reinterpret_cast<const Bits*>(x), reinterpret_cast<Bits*>(y), begin, end, seed,
               threshold, scale);
      return;
    }
  }
#endif
  DropScalar(x, y, begin, end, seed, threshold, scale);
}

}  // namespace

template <typename T>
class SeededDropoutOp : public OpKernel {
 public:
  explicit SeededDropoutOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("rate", &rate_));
    OP_REQUIRES(ctx, rate_ >= 0.0f && rate_ < 1.0f,
                errors::InvalidArgument("rate must be in [0, 1), got ", rate_));
    // P(keep) = 1 - threshold / 2^32; rate < 1 keeps threshold below 2^32.
    threshold_ = static_cast<uint32_t>(static_cast<double>(rate_) * 4294967296.0);
    scale_ = 1.0f / (1.0f - rate_);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& seed_t = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(seed_t.shape()),
                errors::InvalidArgument("seed must be a scalar, got shape ",
                                        seed_t.shape().DebugString()));
    const uint64_t seed = static_cast<uint64_t>(seed_t.scalar<int64_t>()());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, x.shape(), &out));
    const int64_t n = x.NumElements();
    if (n == 0) return;
    const T* src = x.flat<T>().data();
    T* dst = out->flat<T>().data();
    SimdIsa isa = SimdIsa::kScalar;
    OP_REQUIRES_OK(ctx, ChooseSimdIsa(kIsaEnv, &isa));
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const uint64_t seed_v = seed;
    const uint32_t thr = threshold_;
    const float scale = scale_;
    tensorflow::Shard(workers->num_threads, workers->workers, blocks, 6 * kBlock,
                      [&](int64_t b0, int64_t b1) {
                        const int64_t lo = b0 * kBlock, hi = std::min(n, b1 * kBlock);
                        DropRange<T>(src, dst, lo, hi, seed_v, thr, scale, isa);
                      });
  }

 private:
  float rate_ = 0.0f;
  uint32_t threshold_ = 0;
  float scale_ = 1.0f;
};

#define TF_NMT_REGISTER_DROPOUT(T)                                                  \
  REGISTER_KERNEL_BUILDER(                                                          \
      Name("SeededDropout").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      SeededDropoutOp<T>);
TF_NMT_REGISTER_DROPOUT(float)
TF_NMT_REGISTER_DROPOUT(Eigen::bfloat16)
TF_NMT_REGISTER_DROPOUT(Eigen::half)
#undef TF_NMT_REGISTER_DROPOUT

}  // namespace tf_nmt
