// Stand-alone C API over the CUDA launchers (no TensorFlow), for checking the kernels on a GPU
// machine that has nvcc and Python but no TensorFlow (the device tool's machines). Every function
// takes and returns host buffers, does the device allocation / copies itself, synchronises, and
// returns 0 or a CUDA error code. run_standalone.py drives it with golden outputs of the real CPU
// kernels (make_golden.py) and runs the bandwidth benchmark (tfnmt_bench).
//
// Build: `bash tests/gpu/standalone/build.sh` (nvcc, the kernels' .cu.cc files and this one).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "float16_gpu.h"
#include "grad_drop_gpu.h"
#include "grad_drop_plan.h"
#include "grad_drop_sample.h"
#include "quant_codec.h"
#include "quant_gpu.h"

using namespace tf_nmt;

namespace {

#define CHECK(expr)                              \
  do {                                           \
    const cudaError_t e_ = (expr);               \
    if (e_ != cudaSuccess) return static_cast<int>(e_); \
  } while (0)

struct DevBuf {
  void* p = nullptr;
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  cudaError_t Alloc(size_t bytes) { return cudaMalloc(&p, bytes > 0 ? bytes : 1); }
  template <typename T>
  T* as() { return static_cast<T*>(p); }
};

cudaError_t Upload(DevBuf* d, const void* h, size_t bytes) {
  cudaError_t e = d->Alloc(bytes);
  if (e == cudaSuccess && bytes > 0) e = cudaMemcpy(d->p, h, bytes, cudaMemcpyHostToDevice);
  return e;
}

template <class F>
int WithCodec(int codec, F f) {
  return codec == 0 ? f(LogCodec{}) : f(FixedCodec{});
}

template <class F>
int WithType(int dtype, F f) {
  if (dtype == 0) return f(float{});
  if (dtype == 1) return f(Half16{});
  return f(Bf16{});
}

template <class Codec, typename T>
int FitT(const void* x, int64_t n, int bits, int mode, int iters, float* scale) {
  DevBuf dx, scratch, ds;
  CHECK(Upload(&dx, x, sizeof(T) * n));
  CHECK(scratch.Alloc(FitScratchBytes(n)));
  CHECK(ds.Alloc(sizeof(float)));
  CHECK((LaunchFitScale<Codec, T>(0, dx.as<T>(), n, bits, static_cast<FitMode>(mode), iters,
                                  scratch.p, ds.as<float>())));
  CHECK(cudaMemcpy(scale, ds.p, sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}

// The plan as the GPU OpKernel builds it (grad_drop_plan.h, shared with grad_drop_gpu_kernels.cc).
GradDropPlan MakePlan(std::vector<GradDropSpan>* spans, const int64_t* sizes, int n, float ratio,
                      float fraction, int64_t seed, int64_t exact_below, int64_t min_sample) {
  GradDropPlan plan = StartGradDropPlan(n, ratio);
  for (int t = 0; t < n; ++t) AddGradDropSpan(&plan, &(*spans)[t], sizes[t]);
  if (plan.total > 0) FinishGradDropPlan(&plan, fraction, seed, exact_below, min_sample);
  return plan;
}

// Runs both phases on device buffers whose span table is already filled in (pointers, sizes);
// allocates outputs; returns counts and the threshold. Mirrors grad_drop_gpu_kernels.cc.
template <typename T>
int GradDropOnDevice(std::vector<GradDropSpan>* spans, const GradDropPlan& plan,
                     std::vector<DevBuf>* outs, std::vector<int64_t>* counts, float* thr) {
  const int n = plan.num_spans;
  counts->assign(n, 0);
  if (plan.total == 0) {
    *thr = EmptyGradDropThreshold(plan);
    return 0;
  }
  DevBuf d_spans, scratch, d_result;
  CHECK(d_spans.Alloc(sizeof(GradDropSpan) * n));
  CHECK(scratch.Alloc(GradDropScratchBytes(plan)));
  CHECK(d_result.Alloc(GradDropResultBytes(n)));
  CHECK(cudaMemcpy(d_spans.p, spans->data(), sizeof(GradDropSpan) * n, cudaMemcpyHostToDevice));
  CHECK(LaunchGradDropPhase1<T>(0, plan, d_spans.as<GradDropSpan>(), scratch.p, d_result.p));
  std::vector<char> result(GradDropResultBytes(n));
  CHECK(cudaMemcpy(result.data(), d_result.p, result.size(), cudaMemcpyDeviceToHost));
  GradDropResultHeader header;
  std::memcpy(&header, result.data(), sizeof(header));
  *thr = header.threshold;
  outs->resize(2 * n);
  for (int t = 0; t < n; ++t) {
    std::memcpy(&(*counts)[t], result.data() + sizeof(header) + sizeof(int64_t) * t, sizeof(int64_t));
    CHECK((*outs)[t].Alloc(sizeof(int64_t) * (*counts)[t]));
    CHECK((*outs)[n + t].Alloc(sizeof(T) * (*counts)[t]));
    (*spans)[t].out_indices = (*outs)[t].as<int64_t>();
    (*spans)[t].out_values = (*outs)[n + t].p;
  }
  CHECK(cudaMemcpy(d_spans.p, spans->data(), sizeof(GradDropSpan) * n, cudaMemcpyHostToDevice));
  CHECK(LaunchGradDropPhase2<T>(0, plan, d_spans.as<GradDropSpan>(), scratch.p));
  CHECK(cudaDeviceSynchronize());
  return 0;
}

__global__ void FillKernel(float* x, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = SplitMix64(seed + static_cast<uint64_t>(i));
    // sum of two uniforms in [-1, 1): a triangular, roughly bell-shaped distribution
    const float a = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
    const float b = static_cast<float>((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    x[i] = scale * (a + b - 1.0f);
  }
}

}  // namespace

extern "C" {

int tfnmt_fit(int codec, int dtype, const void* x, int64_t n, int bits, int mode, int iters,
              float* scale) {
  return WithCodec(codec, [&](auto c) {
    return WithType(dtype, [&](auto t) {
      return FitT<decltype(c), decltype(t)>(x, n, bits, mode, iters, scale);
    });
  });
}

int tfnmt_encode(int codec, int dtype, const void* x, int64_t n, float scale, int bits,
                 unsigned char* codes) {
  return WithCodec(codec, [&](auto c) {
    return WithType(dtype, [&](auto t) {
      using T = decltype(t);
      DevBuf dx, dc;
      CHECK(Upload(&dx, x, sizeof(T) * n));
      CHECK(dc.Alloc(n));
      CHECK((LaunchEncode<decltype(c), T>(0, dx.as<T>(), n, ScaleArg{scale, nullptr}, bits,
                                          dc.as<unsigned char>())));
      CHECK(cudaMemcpy(codes, dc.p, n, cudaMemcpyDeviceToHost));
      return 0;
    });
  });
}

int tfnmt_decode(int codec, int dtype, const unsigned char* codes, int64_t n, float scale,
                 int bits, void* y, int* bad) {
  return WithCodec(codec, [&](auto c) {
    return WithType(dtype, [&](auto t) {
      using T = decltype(t);
      DevBuf dc, dy, flag;
      CHECK(Upload(&dc, codes, n));
      CHECK(dy.Alloc(sizeof(T) * n));
      CHECK(flag.Alloc(sizeof(unsigned int)));
      CHECK(cudaMemset(flag.p, 0, sizeof(unsigned int)));
      CHECK((LaunchDecode<decltype(c), T>(0, dc.as<unsigned char>(), n, scale, bits, dy.as<T>(),
                                          flag.as<unsigned int>())));
      CHECK(cudaMemcpy(y, dy.p, sizeof(T) * n, cudaMemcpyDeviceToHost));
      unsigned int f = 0;
      CHECK(cudaMemcpy(&f, flag.p, sizeof(f), cudaMemcpyDeviceToHost));
      *bad = f != 0;
      return 0;
    });
  });
}

// Fused quantize (codes != null) or quantize-dequantize (y != null), as the GPU ops run them.
int tfnmt_quantize(int codec, int dtype, const void* x, int64_t n, int bits, int mode, int iters,
                   unsigned char* codes, void* y, float* scale) {
  return WithCodec(codec, [&](auto c) {
    return WithType(dtype, [&](auto t) {
      using T = decltype(t);
      using C = decltype(c);
      DevBuf dx, scratch, ds, dout;
      CHECK(Upload(&dx, x, sizeof(T) * n));
      CHECK(scratch.Alloc(FitScratchBytes(n)));
      CHECK(ds.Alloc(sizeof(float)));
      CHECK((LaunchFitScale<C, T>(0, dx.as<T>(), n, bits, static_cast<FitMode>(mode), iters,
                                  scratch.p, ds.as<float>())));
      if (codes) {
        CHECK(dout.Alloc(n));
        CHECK((LaunchEncode<C, T>(0, dx.as<T>(), n, ScaleArg{0.0f, ds.as<float>()}, bits,
                                  dout.as<unsigned char>())));
        CHECK(cudaMemcpy(codes, dout.p, n, cudaMemcpyDeviceToHost));
      } else {
        CHECK(dout.Alloc(sizeof(T) * n));
        CHECK((LaunchQuantDequant<C, T>(0, dx.as<T>(), n, ScaleArg{0.0f, ds.as<float>()}, bits,
                                        dout.as<T>())));
        CHECK(cudaMemcpy(y, dout.p, sizeof(T) * n, cudaMemcpyDeviceToHost));
      }
      CHECK(cudaMemcpy(scale, ds.p, sizeof(float), cudaMemcpyDeviceToHost));
      return 0;
    });
  });
}

int tfnmt_pack(const unsigned char* codes, int64_t n, unsigned char* packed, int* bad) {
  DevBuf dc, dp, flag;
  CHECK(Upload(&dc, codes, n));
  CHECK(dp.Alloc((n + 1) / 2));
  CHECK(flag.Alloc(sizeof(unsigned int)));
  CHECK(cudaMemset(flag.p, 0, sizeof(unsigned int)));
  CHECK(LaunchPackNibbles(0, dc.as<unsigned char>(), n, dp.as<unsigned char>(), flag.as<unsigned int>()));
  CHECK(cudaMemcpy(packed, dp.p, (n + 1) / 2, cudaMemcpyDeviceToHost));
  unsigned int f = 0;
  CHECK(cudaMemcpy(&f, flag.p, sizeof(f), cudaMemcpyDeviceToHost));
  *bad = f != 0;
  return 0;
}

int tfnmt_unpack(const unsigned char* packed, int64_t n, unsigned char* codes) {
  DevBuf dp, dc;
  CHECK(Upload(&dp, packed, (n + 1) / 2));
  CHECK(dc.Alloc(n));
  CHECK(LaunchUnpackNibbles(0, dp.as<unsigned char>(), n, dc.as<unsigned char>()));
  CHECK(cudaMemcpy(codes, dc.p, n, cudaMemcpyDeviceToHost));
  return 0;
}

// GradDrop over n tensors (n = 1: per tensor; n > 1: GradDropGlobal, one shared threshold).
// new_res[t] receives sizes[t] elements; indices / values come back in malloc'ed buffers (free
// with tfnmt_free_host). in_place != 0: the new residual overwrites the residual's device buffer
// (as when TF forwards the residual input); else it goes to a buffer of its own (TF could not
// forward it) and old_res[t] (if old_res is not null) receives the residual input buffer as
// it is afterwards, which must be unchanged.
int tfnmt_grad_drop(int dtype, int n, const void** g, const void** r, const int64_t* sizes,
                    float ratio, float fraction, int64_t seed, int64_t exact_below,
                    int64_t min_sample, int in_place, void** new_res, void** old_res,
                    int64_t* counts, float* thr, int64_t** indices, void** values) {
  return WithType(dtype, [&](auto tv) {
    using T = decltype(tv);
    std::vector<GradDropSpan> spans(n);
    const GradDropPlan plan = MakePlan(&spans, sizes, n, ratio, fraction, seed, exact_below, min_sample);
    std::vector<DevBuf> dg(n), dr(n), dnew(n), outs;
    for (int t = 0; t < n; ++t) {
      CHECK(Upload(&dg[t], g[t], sizeof(T) * sizes[t]));
      CHECK(Upload(&dr[t], r[t], sizeof(T) * sizes[t]));
      if (!in_place) {
        CHECK(dnew[t].Alloc(sizeof(T) * sizes[t]));
        CHECK(cudaMemset(dnew[t].p, 0xA5, sizeof(T) * sizes[t]));  // garbage, as a fresh output
      }
      spans[t].gradient = dg[t].p;
      spans[t].residual = dr[t].p;
      spans[t].new_residual = in_place ? dr[t].p : dnew[t].p;
    }
    std::vector<int64_t> cnt;
    const int rc = GradDropOnDevice<T>(&spans, plan, &outs, &cnt, thr);
    if (rc != 0) return rc;
    for (int t = 0; t < n; ++t) {
      counts[t] = cnt[t];
      CHECK(cudaMemcpy(new_res[t], spans[t].new_residual, sizeof(T) * sizes[t],
                       cudaMemcpyDeviceToHost));
      if (!in_place && old_res != nullptr) {
        CHECK(cudaMemcpy(old_res[t], dr[t].p, sizeof(T) * sizes[t], cudaMemcpyDeviceToHost));
      }
      indices[t] = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (cnt[t] + 1)));
      values[t] = std::malloc(sizeof(T) * (cnt[t] + 1));
      if (cnt[t] > 0) {
        CHECK(cudaMemcpy(indices[t], outs[t].p, sizeof(int64_t) * cnt[t], cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(values[t], outs[n + t].p, sizeof(T) * cnt[t], cudaMemcpyDeviceToHost));
      }
    }
    return 0;
  });
}

void tfnmt_free_host(void* p) { std::free(p); }

int tfnmt_one_bit(int dtype, const int64_t* idx, const void* val, int64_t kept, int64_t columns,
                  void* residual, int64_t size, void* quantized, void* pos, void* neg, int* bad) {
  return WithType(dtype, [&](auto tv) {
    using T = decltype(tv);
    DevBuf di, dv, dres, dq, dp, dn, scratch, flag;
    CHECK(Upload(&di, idx, sizeof(int64_t) * kept));
    CHECK(Upload(&dv, val, sizeof(T) * kept));
    CHECK(Upload(&dres, residual, sizeof(T) * size));
    CHECK(dq.Alloc(sizeof(T) * kept));
    CHECK(dp.Alloc(sizeof(T) * columns));
    CHECK(dn.Alloc(sizeof(T) * columns));
    CHECK(scratch.Alloc(OneBitScratchBytes(kept, columns)));
    CHECK(flag.Alloc(sizeof(unsigned int)));
    CHECK(cudaMemset(flag.p, 0, sizeof(unsigned int)));
    CHECK(LaunchOneBit<T>(0, di.as<int64_t>(), dv.as<T>(), kept, columns, size, dres.as<T>(),
                          dq.as<T>(), dp.as<T>(), dn.as<T>(), scratch.p, flag.as<unsigned int>()));
    unsigned int f = 0;
    CHECK(cudaMemcpy(&f, flag.p, sizeof(f), cudaMemcpyDeviceToHost));
    *bad = f != 0;
    CHECK(cudaMemcpy(residual, dres.p, sizeof(T) * size, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(quantized, dq.p, sizeof(T) * kept, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(pos, dp.p, sizeof(T) * columns, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(neg, dn.p, sizeof(T) * columns, cudaMemcpyDeviceToHost));
    return 0;
  });
}

// Median times (seconds) of the float32 ops on n device-resident values, event-timed on the
// default stream: out = [copy, graddrop (both phases and the count round trip), encode, decode,
// fit (optimised, 10 iterations), quantize (fit + encode), quantize_dequantize, pack, unpack,
// kept fraction].
int tfnmt_bench(int64_t n, int repeats, double* out) {
  DevBuf g, r, res, copy, codes, y, scratch_fit, ds, packed, unpacked, flag;
  CHECK(g.Alloc(sizeof(float) * n));
  CHECK(r.Alloc(sizeof(float) * n));
  CHECK(res.Alloc(sizeof(float) * n));
  CHECK(copy.Alloc(sizeof(float) * n));
  CHECK(codes.Alloc(n));
  CHECK(y.Alloc(sizeof(float) * n));
  CHECK(scratch_fit.Alloc(FitScratchBytes(n)));
  CHECK(ds.Alloc(sizeof(float)));
  CHECK(packed.Alloc((n + 1) / 2));
  CHECK(unpacked.Alloc(n));
  CHECK(flag.Alloc(sizeof(unsigned int)));
  CHECK(cudaMemset(flag.p, 0, sizeof(unsigned int)));
  FillKernel<<<1024, 256>>>(g.as<float>(), n, 1, 1.0f);
  FillKernel<<<1024, 256>>>(r.as<float>(), n, 2, 0.1f);
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  auto time_it = [&](auto fn, double* dst) -> int {
    std::vector<double> ts;
    for (int i = 0; i < repeats + 1; ++i) {
      CHECK(cudaEventRecord(start));
      const int rc = fn();
      if (rc != 0) return rc;
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (i > 0) ts.push_back(ms / 1e3);  // first call is the warm-up
    }
    std::sort(ts.begin(), ts.end());
    *dst = ts[ts.size() / 2];
    return 0;
  };
  int64_t kept = 0;
  int rc = time_it([&]() -> int {
    CHECK(cudaMemcpyAsync(copy.p, g.p, sizeof(float) * n, cudaMemcpyDeviceToDevice));
    return 0;
  }, &out[0]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    const int64_t sizes[1] = {n};
    std::vector<GradDropSpan> spans(1);
    const GradDropPlan plan = MakePlan(&spans, sizes, 1, 0.99f, 0.001f, 1, 65536, 16384);
    spans[0].gradient = g.p;
    spans[0].residual = r.p;
    spans[0].new_residual = res.p;
    std::vector<DevBuf> outs;
    std::vector<int64_t> counts;
    float thr = 0.0f;
    const int e = GradDropOnDevice<float>(&spans, plan, &outs, &counts, &thr);
    kept = counts.empty() ? 0 : counts[0];
    return e;
  }, &out[1]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    CHECK((LaunchEncode<LogCodec, float>(0, g.as<float>(), n, ScaleArg{3.0f, nullptr}, 4, codes.as<unsigned char>())));
    return 0;
  }, &out[2]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    CHECK((LaunchDecode<LogCodec, float>(0, codes.as<unsigned char>(), n, 3.0f, 4, y.as<float>(), flag.as<unsigned int>())));
    return 0;
  }, &out[3]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    CHECK((LaunchFitScale<LogCodec, float>(0, g.as<float>(), n, 4, FitMode::kOptimised, 10, scratch_fit.p, ds.as<float>())));
    return 0;
  }, &out[4]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    CHECK((LaunchFitScale<LogCodec, float>(0, g.as<float>(), n, 4, FitMode::kOptimised, 10, scratch_fit.p, ds.as<float>())));
    CHECK((LaunchEncode<LogCodec, float>(0, g.as<float>(), n, ScaleArg{0.0f, ds.as<float>()}, 4, codes.as<unsigned char>())));
    return 0;
  }, &out[5]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    CHECK((LaunchFitScale<LogCodec, float>(0, g.as<float>(), n, 4, FitMode::kOptimised, 10, scratch_fit.p, ds.as<float>())));
    CHECK((LaunchQuantDequant<LogCodec, float>(0, g.as<float>(), n, ScaleArg{0.0f, ds.as<float>()}, 4, y.as<float>())));
    return 0;
  }, &out[6]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    CHECK(LaunchPackNibbles(0, unpacked.as<unsigned char>(), n, packed.as<unsigned char>(), flag.as<unsigned int>()));
    return 0;
  }, &out[7]);
  if (rc) return rc;
  rc = time_it([&]() -> int {
    CHECK(LaunchUnpackNibbles(0, packed.as<unsigned char>(), n, unpacked.as<unsigned char>()));
    return 0;
  }, &out[8]);
  if (rc) return rc;
  out[9] = static_cast<double>(kept) / static_cast<double>(n);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 0;
}

}  // extern "C"
