// Log-space (shift16, lut8), int8 and fp32 matrix-multiply kernels: the functions lowprec_dot.h
// declares, around the templates of lowprec_dot_inl.h (AVX-512 code compiled with per-function
// target attributes: the library itself is built for baseline x86-64, so nothing there runs
// unless SimdAvailable() says so; and a portable scalar fallback that gives the same integers).
// See lowprec_dot.h for the arithmetic and the operand layouts.
#include "lowprec_dot.h"

#include <cstdlib>
#include <cstring>

#include "lowprec_dot_inl.h"

namespace tf_nmt {
namespace lowprec {

const uint8_t kLut8Table[16] = {255, 172, 115, 78, 52, 35, 24, 16, 11, 7, 5, 3, 2, 1, 1, 0};
const float kLut8Mid[7] = {0x1.ac4676p-1f, 0x1.203536p-1f, 0x1.83e626p-2f, 0x1.050964p-2f,
                           0x1.5f544ep-3f, 0x1.d8daacp-4f, 0x1.3e3510p-4f};

bool SimdAvailable() {
#if TF_NMT_LOWPREC_X86
  __builtin_cpu_init();  // libgcc also checks that the OS saves the zmm/mask state (XCR0)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool SimdAllowedByEnv() {
  const char* v = std::getenv("TF_NMT_LOWPREC_SCALAR");
  return v == nullptr || v[0] == '\0' || std::strcmp(v, "0") == 0;
}

void PackShift16(const uint8_t* codes, int64_t rows, int64_t k, bool a_side, int16_t* out) {
  const int64_t kp = PaddedK(k);
  const int16_t pad = a_side ? 16 : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* c = codes + r * k;
    int16_t* o = out + r * kp;
    for (int64_t t = 0; t < k; ++t) {
      o[t] = static_cast<int16_t>(static_cast<uint16_t>((c[t] & 7) | ((c[t] & 8) << 12)));
    }
    for (int64_t t = k; t < kp; ++t) o[t] = pad;
  }
}

void PackLut8(const uint8_t* codes, int64_t rows, int64_t k, bool a_side, uint8_t* out) {
  const int64_t kp = PaddedK(k);
  const uint8_t pad = a_side ? 0x80 : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* c = codes + r * k;
    uint8_t* o = out + r * kp;
    for (int64_t t = 0; t < k; ++t) o[t] = static_cast<uint8_t>((c[t] & 7) | ((c[t] & 8) << 1));
    for (int64_t t = k; t < kp; ++t) o[t] = pad;
  }
}

void MatMulShift16(const int16_t* a, const int16_t* b, int64_t kp, int64_t i0, int64_t i1,
                   int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd) {
  internal::MatMul<Method::kShift16>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

void MatMulLut8(const uint8_t* a, const uint8_t* b, int64_t kp, int64_t i0, int64_t i1,
                int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd) {
  internal::MatMul<Method::kLut8>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

void MatMulInt8(const uint8_t* a, const int8_t* b, int64_t kp, int64_t i0, int64_t i1,
                int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd) {
  internal::MatMul<Method::kInt8>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

void MatMulFp32(const float* a, const float* b, int64_t kp, int64_t i0, int64_t i1, int64_t j0,
                int64_t j1, float* out, int64_t ldo, bool simd) {
  internal::MatMul<Method::kFp32>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

}  // namespace lowprec
}  // namespace tf_nmt
