/* The built-in kernels on a GPU against the same source on the CPU, bit
 * for bit (test kern_gpu: built by nvcc when CMake finds it, skipped with
 * 77 where no GPU is present). Each call runs as one CTA of 256 threads,
 * its scratch in shared memory, through hbg__k_run_cta; the reference is
 * the host pass of kern_src.h with one lane, as the sim and the workloads'
 * host reference run it. exp, sin and cos are compared over a sweep. The
 * bf16 cases read their weight (GEMV's W, RMSNORM's w, COPY's input) as
 * bf16 packed into the pool. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/kern_src.h"

#define SCRATCH (2 * HBG__K_PARTS + 2048)

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,          \
                   cudaGetErrorString(e_));                                    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void run_call(const hbg__kcall *c) {
  __shared__ float scratch[SCRATCH];
  hbg__k_run_cta(c, scratch);
}

__global__ void math(const float *x, float *y, uint32_t n) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[3 * i] = hbg__k_expf(x[i]);
    y[3 * i + 1] = hbg__k_sinf(x[i]);
    y[3 * i + 2] = hbg__k_cosf(x[i]);
  }
}

static uint32_t rng = 4242;
static float frand() {
  rng = rng * 1664525u + 1013904223u;
  return (float)(rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static hbg__ktensor mk(float *data, uint32_t ndim, const uint32_t *shape,
                       const uint32_t *strides) {
  hbg__ktensor k;
  std::memset(&k, 0, sizeof k);
  k.data = data;
  k.dtype = 1;
  k.ndim = ndim;
  k.mode = 3;
  uint32_t s = 1;
  for (uint32_t i = ndim; i-- > 0;) {
    k.shape[i] = shape[i];
    k.strides[i] = strides ? strides[i] : s;
    s *= shape[i];
  }
  return k;
}

/* The same over bf16 elements stored in the pool from base (2 a float). */
static hbg__ktensor mkb(float *base, uint32_t ndim, const uint32_t *shape,
                        const uint32_t *strides) {
  hbg__ktensor k = mk(base, ndim, shape, strides);
  k.dtype = 3; /* HBG_IMG_DTYPE_BF16 */
  return k;
}

/* n bf16 values (nearest to random floats) packed into the pool at p. */
static void fill_bf16(float *p, uint32_t n) {
  std::vector<uint16_t> b(n);
  for (auto &v : b)
    v = hbg__k_f32_bf16(frand());
  std::memcpy(p, b.data(), (size_t)n * 2);
}

/* One pool of floats; tensors are offsets into it, on both sides. */
struct pool {
  std::vector<float> h;
  float *d = nullptr;
};

struct kcase {
  const char *name;
  uint32_t kernel, nt, ns;
  hbg__ktensor t[4]; /* data: host pool addresses */
  uint64_t sc[2];
};

static int run_case(pool &p, const kcase &k) {
  /* CPU: one lane */
  std::vector<float> cpu = p.h;
  hbg__ktensor th[4];
  for (uint32_t i = 0; i < k.nt; i++) {
    th[i] = k.t[i];
    th[i].data = cpu.data() + ((float *)k.t[i].data - p.h.data());
  }
  hbg__kcall c;
  std::memset(&c, 0, sizeof c);
  c.kernel = k.kernel;
  c.nt = k.nt;
  c.ns = k.ns;
  c.t = th;
  c.sc = k.sc;
  if (hbg__k_values_check(&c) != 0 || hbg__k_scratch_floats(&c) > SCRATCH) {
    std::fprintf(stderr, "%s: bad case\n", k.name);
    return 1;
  }
  hbg__kcall cp = c;
  hbg__k_prepare(&cp);
  std::vector<float> s(SCRATCH);
  for (uint64_t ph = 0; ph < hbg__k_phases(&cp); ph++)
    hbg__k_phase(&cp, ph, 0, 1, s.data());
  /* GPU: a CTA of 256 */
  CK(cudaMemcpy(p.d, p.h.data(), p.h.size() * 4, cudaMemcpyHostToDevice));
  hbg__ktensor td[4];
  for (uint32_t i = 0; i < k.nt; i++) {
    td[i] = k.t[i];
    td[i].data = p.d + ((float *)k.t[i].data - p.h.data());
  }
  hbg__ktensor *dt;
  uint64_t *dsc;
  hbg__kcall *dc;
  CK(cudaMalloc(&dt, sizeof td));
  CK(cudaMalloc(&dsc, sizeof k.sc));
  CK(cudaMalloc(&dc, sizeof c));
  CK(cudaMemcpy(dt, td, sizeof td, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dsc, k.sc, sizeof k.sc, cudaMemcpyHostToDevice));
  hbg__kcall cd = c;
  cd.t = dt;
  cd.sc = dsc;
  CK(cudaMemcpy(dc, &cd, sizeof cd, cudaMemcpyHostToDevice));
  run_call<<<1, 256>>>(dc);
  CK(cudaGetLastError());
  std::vector<float> gpu(p.h.size());
  CK(cudaMemcpy(gpu.data(), p.d, gpu.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaFree(dt));
  CK(cudaFree(dsc));
  CK(cudaFree(dc));
  for (size_t i = 0; i < gpu.size(); i++)
    if (std::memcmp(&gpu[i], &cpu[i], 4) != 0) {
      std::fprintf(stderr, "%s: float %zu: gpu %.9g cpu %.9g\n", k.name, i,
                   (double)gpu[i], (double)cpu[i]);
      return 1;
    }
  std::printf("%-9s bit-exact\n", k.name);
  return 0;
}

static uint64_t f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

int main() {
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    std::printf("kern_gpu: no GPU, skipped\n");
    return 77;
  }
  enum { R = 3, D = 600, N = 37, K = 301, HQ = 4, HK = 2, T = 300, HD = 16 };
  pool p;
  p.h.resize(64 * 1024);
  for (auto &v : p.h)
    v = frand();
  for (int i = 0; i < R * D; i++)
    p.h[i] *= 8.0f;
  CK(cudaMalloc(&p.d, p.h.size() * 4));
  float *a = p.h.data(), *b = a + R * D, *o = b + R * D, *w = o + R * D;
  float *x = w + N * K, *kc = x + K, *vc = kc + HK * T * HD,
        *cs = vc + HK * T * HD, *sn = cs + 4 * 32;
  /* bf16 weights: W [N][K] and w [D] */
  float *wb = sn + 4 * 32, *nb = wb + (N * K + 1) / 2;
  fill_bf16(wb, N * K);
  fill_bf16(nb, D);
  const uint32_t s_rd[] = {R, D}, s_dr[] = {D, R}, st_dr[] = {1, D},
                 s_flat[] = {R * D}, s_d[] = {D}, s_nk[] = {N, K}, s_k[] = {K},
                 s_n[] = {N}, st3[] = {3}, s_rope[] = {5, 64},
                 s_tab[] = {4, 32}, s_q[] = {HQ, HD}, s_kv[] = {HK, T, HD},
                 st_kv[] = {HD, HK * HD, 1};
  kcase cases[] = {
      {"add", 2, 3, 0, {mk(a, 2, s_dr, st_dr), mk(b, 1, s_flat, nullptr),
                        mk(o, 2, s_dr, nullptr)}, {0, 0}},
      {"silu_mul", 8, 3, 0, {mk(a, 2, s_dr, st_dr), mk(b, 1, s_flat, nullptr),
                             mk(o, 1, s_flat, nullptr)}, {0, 0}},
      {"scale", 4, 2, 1, {mk(a, 1, s_flat, nullptr), mk(o, 1, s_flat, nullptr)},
       {f32(0.75f), 0}},
      {"rmsnorm", 5, 3, 1, {mk(a, 2, s_rd, nullptr), mk(b, 1, s_d, nullptr),
                            mk(o, 2, s_rd, nullptr)}, {f32(1e-5f), 0}},
      {"softmax", 9, 2, 0, {mk(a, 2, s_rd, nullptr), mk(o, 2, s_rd, nullptr)},
       {0, 0}},
      {"gemv", 6, 3, 1, {mk(w, 2, s_nk, nullptr), mk(x, 1, s_k, nullptr),
                         mk(o, 1, s_n, st3)}, {f32(0.5f), 0}},
      {"rope", 7, 4, 1, {mk(a, 2, s_rope, nullptr), mk(cs, 2, s_tab, nullptr),
                         mk(sn, 2, s_tab, nullptr), mk(o, 2, s_rope, nullptr)},
       {2, 0}},
      {"attn", 10, 4, 2, {mk(a, 2, s_q, nullptr), mk(kc, 3, s_kv, st_kv),
                          mk(vc, 3, s_kv, nullptr), mk(o, 2, s_q, nullptr)},
       {290, f32(0.3f)}},
      {"gemv_bf16", 6, 3, 1, {mkb(wb, 2, s_nk, nullptr),
                              mk(x, 1, s_k, nullptr), mk(o, 1, s_n, st3)},
       {f32(0.5f), 0}},
      {"rms_bf16", 5, 3, 1, {mk(a, 2, s_rd, nullptr), mkb(nb, 1, s_d, nullptr),
                             mk(o, 2, s_rd, nullptr)}, {f32(1e-5f), 0}},
      {"copy_bf16", 1, 2, 0, {mkb(wb, 1, s_flat, nullptr),
                              mk(o, 1, s_flat, nullptr)}, {0, 0}},
      {"attn_l5", 10, 4, 1, {mk(a, 2, s_q, nullptr), mk(kc, 3, s_kv, st_kv),
                             mk(vc, 3, s_kv, nullptr), mk(o, 2, s_q, nullptr)},
       {5, 0}},
  };
  int bad = 0;
  for (const kcase &k : cases)
    bad |= run_case(p, k);
  /* exp, sin, cos: a sweep over [-100, 100] and a few special values */
  const uint32_t n = 1u << 20;
  std::vector<float> xs(n), ys(3 * n);
  for (uint32_t i = 0; i < n; i++)
    xs[i] = -100.0f + 200.0f * (float)i / (float)n;
  xs[0] = 0.0f;
  xs[1] = -0.0f;
  xs[2] = 88.72283172607422f;
  xs[3] = -103.5f;
  float *dx, *dy;
  CK(cudaMalloc(&dx, n * 4));
  CK(cudaMalloc(&dy, 3 * n * 4));
  CK(cudaMemcpy(dx, xs.data(), n * 4, cudaMemcpyHostToDevice));
  math<<<n / 256, 256>>>(dx, dy, n);
  CK(cudaGetLastError());
  CK(cudaMemcpy(ys.data(), dy, 3 * n * 4, cudaMemcpyDeviceToHost));
  for (uint32_t i = 0; i < n; i++) {
    float h[3] = {hbg__k_expf(xs[i]), hbg__k_sinf(xs[i]), hbg__k_cosf(xs[i])};
    if (std::memcmp(h, &ys[3 * i], sizeof h) != 0) {
      std::fprintf(stderr, "math at x = %a differs\n", (double)xs[i]);
      bad = 1;
      break;
    }
  }
  if (!bad)
    std::printf("exp/sin/cos bit-exact over %u inputs\n", n);
  CK(cudaFree(dx));
  CK(cudaFree(dy));
  CK(cudaFree(p.d));
  return bad;
}
