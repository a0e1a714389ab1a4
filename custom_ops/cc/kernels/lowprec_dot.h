// Log-space dot products and matrix multiplies on 4-bit codes, plus the int8 and fp32
// baselines they are benchmarked against (thesis section 7.3.5, Table 7.5). Plain C++, no TF.
// The kernels' templates are in lowprec_dot_inl.h; the Table 7.5 microbenchmark that times them
// is experiment code (experiments/lowprec/cc/lowprec_bench_ops.cc), not part of this library.
//
// Codes are the LogQuantize 4-bit layout (quant_codec.h): code = (sign << 3) | k, k in [0, 8),
// one code per byte. Value = +-S * base^-k, no zero level. A product of two codes is
// sign_a XOR sign_b and base^-(ka + kb), e = ka + kb in [0, 14], so sum_i a_i b_i needs no
// multiplier, only an exponent add and a power:
//   shift16: base 2. term = +-(0x4000 >> e) = +-2^(14 - e), exact; value = S_a S_b acc 2^-14.
//            Lanes are int16 (the 4-bit codes emulated in 16-bit lanes), power by a variable
//            arithmetic shift of +-2^14 (vpsravw), widened into int32 accumulators (vpdpwssd
//            against ones).
//   lut8:    base 256^(1/14) = 2^(4/7), so the 15 powers fit in a byte: term = +-kLut8Table[e]
//            with kLut8Table[e] = round(255 * 2^(-4e/7)); value = S_a S_b acc / 255. Lanes are
//            bytes, the power is a vpshufb table lookup, the sign a +-1 byte from a vpermb
//            lookup, and vpdpbusd adds power * (+-1) into int32 accumulators.
// Both accumulators are exact integers, so a scalar loop (the portable fallback) and a NumPy
// reference reproduce them exactly.
//
// Internal operand layouts (rows padded to a multiple of kPadK elements; see Pack*):
//   shift16: int16 k | sign << 15. a + b adds exponents in the low bits and XORs the signs in
//            bit 15 (its carry falls off). Padding is 16 on the A side (0 on B): sign 0 and a
//            shift >= 16 give 0.
//   lut8:    uint8 k | sign << 4. a + b: exponent sum in bits 0-3, sign XOR in bit 4. Padding
//            is 0x80 on the A side: vpshufb returns 0 for an index with bit 7 set.
#ifndef TF_NMT_LOWPREC_DOT_H_
#define TF_NMT_LOWPREC_DOT_H_

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace tf_nmt {
namespace lowprec {

// 64-byte aligned storage for packed rows (row strides are multiples of 64 bytes), so that no
// zmm load splits a cache line: misaligned buffers made the kernels up to 2x slower, depending
// on where malloc happened to put them.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const AlignedAllocator<U>&) const { return false; }
};
template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

enum class Method { kFp32 = 0, kInt8 = 1, kShift16 = 2, kLut8 = 3 };

constexpr int kPadK = 64;            // rows are padded to a multiple of this many elements
constexpr int kShift16Offset = 14;   // shift16 term = 2^(kShift16Offset - e)
constexpr int kLut8One = 255;        // lut8 table entry for e = 0 (the value 1)
constexpr int64_t kShift16MaxK = 131071;  // K * 2^14 must fit in int32
constexpr int64_t kLut8MaxK = 8421504;    // K * 255 must fit in int32

// kLut8Table[e] = round(255 * 2^(-4e/7)) for e = 0..14; entry 15 is unused (0).
extern const uint8_t kLut8Table[16];
// lut8 encoding thresholds: float32((b^-j + b^-(j+1)) / 2), b = 2^(4/7), j = 0..6.
extern const float kLut8Mid[7];

inline int64_t PaddedK(int64_t k) { return (k + kPadK - 1) / kPadK * kPadK; }

// True when this CPU (and OS) supports AVX-512 F/BW/VBMI/VNNI, i.e. the SIMD kernels can run.
bool SimdAvailable();
// True unless $TF_NMT_LOWPREC_SCALAR is set to a non-empty value other than "0".
bool SimdAllowedByEnv();

// Codes (one per byte, [rows, k] row-major, already range-checked) to the method's lanes,
// rows of kp = PaddedK(k) elements. a_side selects the padding (see above).
void PackShift16(const uint8_t* codes, int64_t rows, int64_t k, bool a_side, int16_t* out);
void PackLut8(const uint8_t* codes, int64_t rows, int64_t k, bool a_side, uint8_t* out);

// out[i * ldo + j] = sum over kp of rows a[i] and b[j], for i in [i0, i1), j in [j0, j1).
// a and b are packed rows of kp elements (kp a multiple of kPadK); simd picks the AVX-512 code
// (the caller checks SimdAvailable()) or the scalar loop (same integers).
void MatMulShift16(const int16_t* a, const int16_t* b, int64_t kp, int64_t i0, int64_t i1,
                   int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd);
void MatMulLut8(const uint8_t* a, const uint8_t* b, int64_t kp, int64_t i0, int64_t i1,
                int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd);
// Baselines: uint8 a x int8 b (vpdpbusd) and fp32 FMA, same row layout and blocking.
void MatMulInt8(const uint8_t* a, const int8_t* b, int64_t kp, int64_t i0, int64_t i1,
                int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd);
void MatMulFp32(const float* a, const float* b, int64_t kp, int64_t i0, int64_t i1, int64_t j0,
                int64_t j1, float* out, int64_t ldo, bool simd);

}  // namespace lowprec
}  // namespace tf_nmt

#endif  // TF_NMT_LOWPREC_DOT_H_
