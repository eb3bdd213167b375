// Checks and times opgen's row-wise launcher (templates/rowwise/csrc/opgen/rowwise.cuh) on its
// own, without Paddle (scripts/gpu/rowwise.sh builds and runs it):
//   nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc -Itemplates/rowwise/csrc \
//     scripts/gpu/rowwise_bench.cu -o /tmp/rowwise_bench && /tmp/rowwise_bench [--check-only |
//     --time-only] [--quick] [--float-only] [--op NAME] [--shape RxC] [--dtype NAME] [--iters N]
// Hand-written functors in the shape opgen generates: softmax (with scale), rms_norm and
// layer_norm (saving mean and rstd), forward and backward (layer_norm's weight and bias gradients
// through put_column_sums). First every op in float32, float64, float16 and bfloat16 against a
// host reference in double over row lengths 0, 1, 7, 128, 1000, 4096, 32768 and more (every
// schedule, vector and element-wise paths, misaligned pointers, 0 rows, an all -inf softmax row,
// a NaN row); every backward runs twice for bit-identical column sums. Then times the anchor
// shapes of issue 13 with CUDA events against a device-to-device cudaMemcpyAsync of the same
// bytes, in the same run: one line per (op, shape, dtype) with ms, GB/s over the bytes the op
// must move (inputs read and outputs written, [cols] and [rows] tensors left out) and the ratio to
// the copy's GB/s. Exits 1 on any mismatch; a ratio below its target is reported (MISS) without
// failing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "opgen/rowwise.cuh"
#include "rowwise_ops.h"

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t e = (call);                                                            \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));  \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

using opgen::rowwise::Col;
using opgen::rowwise::Elem;
using opgen::rowwise::Pointers;
using opgen::rowwise::RowStat;

// ---- host references in double -------------------------------------------------------------
double NanMax(double a, double b) { return (a > b || a != a) ? a : b; }

// out; per-row outputs; column sums; for a backward, the magnitude of each output's terms (they
// cancel: a 1-column rms_norm's gradient is ~1e-6 from terms ~1, so error scales with them).
struct Ref {
  std::vector<double> out, rows0, rows1, col0, col1, mag0, mag1, out_mag;
};

Ref SoftmaxRef(const std::vector<double>& x, int64_t rows, int64_t cols, double scale) {
  Ref r;
  r.out.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = &x[i * cols];
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < cols; ++j) m = NanMax(m, xr[j] * scale);
    for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] * scale - m);
    for (int64_t j = 0; j < cols; ++j) r.out[i * cols + j] = std::exp(xr[j] * scale - m) / s;
  }
  return r;
}
Ref SoftmaxBackRef(const std::vector<double>& y, const std::vector<double>& g, int64_t rows,
                   int64_t cols, double scale) {
  Ref r;
  r.out.resize(y.size());
  r.out_mag.resize(y.size());
  for (int64_t i = 0; i < rows; ++i) {
    double d = 0;
    for (int64_t j = 0; j < cols; ++j) d += y[i * cols + j] * g[i * cols + j];
    for (int64_t j = 0; j < cols; ++j) {
      r.out[i * cols + j] = scale * y[i * cols + j] * (g[i * cols + j] - d);
      r.out_mag[i * cols + j] = std::fabs(scale * y[i * cols + j]) *
                                (std::fabs(g[i * cols + j]) + std::fabs(d));
    }
  }
  return r;
}
Ref RmsRef(const std::vector<double>& x, const std::vector<double>& w, int64_t rows, int64_t cols,
           double eps) {
  Ref r;
  r.out.resize(x.size());
  r.rows0.resize(rows);
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < cols; ++j) ss += x[i * cols + j] * x[i * cols + j];
    const double rstd = 1 / std::sqrt(ss / cols + eps);
    r.rows0[i] = rstd;
    for (int64_t j = 0; j < cols; ++j) r.out[i * cols + j] = x[i * cols + j] * rstd * w[j];
  }
  return r;
}
Ref RmsBackRef(const std::vector<double>& x, const std::vector<double>& w,
               const std::vector<double>& rstd, const std::vector<double>& g, int64_t rows,
               int64_t cols) {
  Ref r;
  r.out.resize(x.size());
  r.out_mag.resize(x.size());
  r.col0.assign(cols, 0);
  r.mag0.assign(cols, 0);
  for (int64_t i = 0; i < rows; ++i) {
    double c = 0;
    const double rs = rstd[i];
    for (int64_t j = 0; j < cols; ++j) c += g[i * cols + j] * w[j] * x[i * cols + j];
    c /= cols;
    for (int64_t j = 0; j < cols; ++j) {
      const double xv = x[i * cols + j], gv = g[i * cols + j];
      r.out[i * cols + j] = rs * (gv * w[j] - xv * rs * rs * c);
      r.out_mag[i * cols + j] = rs * (std::fabs(gv * w[j]) + std::fabs(xv * rs * rs * c));
      r.col0[j] += gv * xv * rs;
      r.mag0[j] += std::fabs(gv * xv * rs);
    }
  }
  return r;
}
Ref LayerNormRef(const std::vector<double>& x, const std::vector<double>& w,
                 const std::vector<double>& b, int64_t rows, int64_t cols, double eps) {
  Ref r;
  r.out.resize(x.size());
  r.rows0.resize(rows);
  r.rows1.resize(rows);
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < cols; ++j) m += x[i * cols + j];
    m /= cols;
    for (int64_t j = 0; j < cols; ++j) v += (x[i * cols + j] - m) * (x[i * cols + j] - m);
    v /= cols;
    const double rstd = 1 / std::sqrt(v + eps);
    r.rows0[i] = m;
    r.rows1[i] = rstd;
    for (int64_t j = 0; j < cols; ++j) {
      r.out[i * cols + j] = (x[i * cols + j] - m) * rstd * w[j] + b[j];
    }
  }
  return r;
}
Ref LayerNormBackRef(const std::vector<double>& x, const std::vector<double>& w,
                     const std::vector<double>& mean, const std::vector<double>& rstd,
                     const std::vector<double>& g, int64_t rows, int64_t cols) {
  Ref r;
  r.out.resize(x.size());
  r.out_mag.resize(x.size());
  r.col0.assign(cols, 0);
  r.col1.assign(cols, 0);
  r.mag0.assign(cols, 0);
  r.mag1.assign(cols, 0);
  for (int64_t i = 0; i < rows; ++i) {
    double a = 0, b = 0;
    const double m = mean[i], rs = rstd[i];
    for (int64_t j = 0; j < cols; ++j) {
      const double gw = g[i * cols + j] * w[j];
      a += gw;
      b += gw * (x[i * cols + j] - m) * rs;
    }
    a /= cols;
    b /= cols;
    for (int64_t j = 0; j < cols; ++j) {
      const double xh = (x[i * cols + j] - m) * rs, gv = g[i * cols + j];
      r.out[i * cols + j] = rs * (gv * w[j] - a - xh * b);
      r.out_mag[i * cols + j] = rs * (std::fabs(gv * w[j]) + std::fabs(a) + std::fabs(xh * b));
      r.col0[j] += gv * xh;
      r.col1[j] += gv;
      r.mag0[j] += std::fabs(gv * xh);
      r.mag1[j] += std::fabs(gv);
    }
  }
  return r;
}

// ---- dtypes --------------------------------------------------------------------------------
template <typename T>
struct Dtype;
template <>
struct Dtype<float> {
  static constexpr const char* kName = "float32";
  static constexpr double kRtol = 2e-5, kAtol = 2e-5;
};
template <>
struct Dtype<double> {
  static constexpr const char* kName = "float64";
  static constexpr double kRtol = 1e-12, kAtol = 1e-12;
};
template <>
struct Dtype<__half> {
  static constexpr const char* kName = "float16";
  static constexpr double kRtol = 2e-3, kAtol = 2e-3;  // one float16 ulp is 2^-10
};
template <>
struct Dtype<__nv_bfloat16> {
  static constexpr const char* kName = "bfloat16";
  static constexpr double kRtol = 1.6e-2, kAtol = 1.6e-2;  // one bfloat16 ulp is 2^-7
};

template <typename T>
double ToDouble(T v) {
  return static_cast<double>(static_cast<float>(v));
}
template <>
double ToDouble<double>(double v) {
  return v;
}
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return static_cast<T>(static_cast<float>(v));
  }
}

// Input values in [-2, 2), rounded to T; `salt` tells the tensors apart.
template <typename T>
std::vector<T> Values(int64_t n, int salt, double lo = -2, double hi = 2) {
  std::vector<T> v(n);
  uint64_t s = 0x9E3779B97F4A7C15ull * (salt + 1);
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v[i] = FromDouble<T>(lo + (hi - lo) * double(s >> 11) / double(1ull << 53));
  }
  return v;
}
template <typename T>
std::vector<double> AsDouble(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) d[i] = ToDouble(v[i]);
  return d;
}

// A device buffer of n elements of T at `offset` elements past a 256-byte aligned allocation
// (offset 1 makes every vector path fall back to elements).
template <typename T>
struct Buffer {
  void* base = nullptr;
  T* ptr = nullptr;
  int64_t n = 0;
  Buffer(int64_t count, int offset = 0) : n(count) {
    CHECK(cudaMalloc(&base, (count + offset + 1) * sizeof(T) + 256));
    ptr = reinterpret_cast<T*>(base) + offset;
  }
  Buffer(const std::vector<T>& host, int offset = 0) : Buffer(int64_t(host.size()), offset) {
    if (n) CHECK(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Buffer() { cudaFree(base); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::vector<T> Get() const {
    std::vector<T> h(n);
    if (n) CHECK(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  void Poison() {
    if (n) CHECK(cudaMemset(ptr, 0xFF, n * sizeof(T)));
  }
};

int g_failures = 0;
int g_checks = 0;

// got vs want: |got - want| <= rtol |want| + atol (scale + mag), NaN where want is NaN.
template <typename G>
bool Compare(const char* what, const std::string& where, const std::vector<G>& got,
             const std::vector<double>& want, double rtol, double atol,
             const std::vector<double>* mag = nullptr) {
  ++g_checks;
  double scale = 0;
  for (double w : want) {
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = ToDouble(got[i]), w = want[i];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else {
      const double tol = rtol * std::fabs(w) + atol * (scale + (mag ? (*mag)[i] : 0.0));
      ok = std::fabs(g - w) <= tol || g == w;
    }
    if (!ok) {
      std::printf("MISMATCH %s %s at %zu: got %.9g want %.9g\n", what, where.c_str(), i, g, w);
      ++g_failures;
      return false;
    }
  }
  return true;
}

template <typename F, typename... Roles, typename P>
void Launch(const F& f, const P& p) {
  const std::size_t bytes = opgen::rowwise::WorkspaceBytes<F, Roles...>(p);
  void* workspace = nullptr;
  if (bytes) CHECK(cudaMalloc(&workspace, bytes));
  CHECK((opgen::rowwise::Run<F, Roles...>(f, p, workspace, nullptr)));
  CHECK(cudaDeviceSynchronize());
  cudaFree(workspace);
}

// Every op on one shape: forward against the reference, backward fed the reference's saved
// statistics (rounded as the op stores them).
template <typename T>
void CheckShape(int64_t rows, int64_t cols, int offset, bool special_rows) {
  using Acc = opgen::OpMathT<T>;
  const double rtol = Dtype<T>::kRtol, atol = Dtype<T>::kAtol;
  const std::string where = std::string(Dtype<T>::kName) + " " + std::to_string(rows) + "x" +
                            std::to_string(cols) + (offset ? " misaligned" : "");
  const int64_t n = rows * cols;
  std::vector<T> hx = Values<T>(n, 1), hg = Values<T>(n, 2), hw = Values<T>(cols, 3, 0.5, 1.5),
                 hb = Values<T>(cols, 4);
  // softmax's input: row 0 all -inf (every output NaN, as in the formula), row 1 with a NaN
  std::vector<T> hs = hx;
  if (special_rows && rows >= 2 && cols >= 1) {
    for (int64_t j = 0; j < cols; ++j) hs[j] = FromDouble<T>(-INFINITY);
    hs[cols + cols / 2] = FromDouble<T>(NAN);
  }
  const std::vector<double> x = AsDouble(hx), g = AsDouble(hg), w = AsDouble(hw),
                            b = AsDouble(hb), xs = AsDouble(hs);
  Buffer<T> ds(hs, offset), dx(hx, offset), dg(hg, offset), dw(hw, offset), db(hb, offset), out(n, offset),
      grad(n, offset), gw(cols, offset), gb(cols, offset);

  // softmax
  const double scale = 0.75;
  {
    out.Poison();
    Pointers<T, 1, 1> p;
    p.in[0] = ds.ptr;
    p.out[0] = out.ptr;
    p.rows = rows;
    p.cols = cols;
    Launch<SoftmaxForward<T>, Elem>(SoftmaxForward<T>{Acc(scale)}, p);
    const Ref r = SoftmaxRef(xs, rows, cols, scale);
    Compare("softmax", where, out.Get(), r.out, rtol, atol);
    // backward from the forward's reference rounded to T
    std::vector<T> hy(n);
    for (int64_t i = 0; i < n; ++i) hy[i] = FromDouble<T>(r.out[i]);
    const std::vector<double> y = AsDouble(hy);
    Buffer<T> dy(hy, offset);
    grad.Poison();
    Pointers<T, 2, 1> q;
    q.in[0] = dy.ptr;
    q.in[1] = dg.ptr;
    q.out[0] = grad.ptr;
    q.rows = rows;
    q.cols = cols;
    Launch<SoftmaxBackward<T>, Elem, Elem>(SoftmaxBackward<T>{Acc(scale)}, q);
    const Ref rb = SoftmaxBackRef(y, g, rows, cols, scale);
    Compare("softmax_grad", where, grad.Get(), rb.out, rtol, atol, &rb.out_mag);
  }
  // rms_norm
  {
    out.Poison();
    Buffer<Acc> rstd(rows);
    rstd.Poison();
    Pointers<T, 2, 1, 1> p;
    p.in[0] = dx.ptr;
    p.in[1] = dw.ptr;
    p.out[0] = out.ptr;
    p.row_out[0] = rstd.ptr;
    p.rows = rows;
    p.cols = cols;
    Launch<RmsNormForward<T>, Elem, Col>(RmsNormForward<T>{Acc(1e-6)}, p);
    const Ref r = RmsRef(x, w, rows, cols, 1e-6);
    Compare("rms_norm", where, out.Get(), r.out, rtol, atol);
    Compare("rms_norm.rstd", where, rstd.Get(), r.rows0, Dtype<Acc>::kRtol * 10, 0);
    std::vector<Acc> hr(rows);
    for (int64_t i = 0; i < rows; ++i) hr[i] = Acc(r.rows0[i]);
    Buffer<Acc> saved(hr);
    std::vector<double> rs(rows);
    for (int64_t i = 0; i < rows; ++i) rs[i] = double(hr[i]);
    const Ref rb = RmsBackRef(x, w, rs, g, rows, cols);
    std::vector<T> first;
    for (int run = 0; run < 2; ++run) {
      grad.Poison();
      gw.Poison();
      Pointers<T, 4, 1, 0, 1> q;
      q.in[0] = dx.ptr;
      q.in[1] = dw.ptr;
      q.in[2] = saved.ptr;
      q.in[3] = dg.ptr;
      q.out[0] = grad.ptr;
      q.col_sum[0] = gw.ptr;
      q.rows = rows;
      q.cols = cols;
      Launch<RmsNormBackward<T>, Elem, Col, RowStat, Elem>(RmsNormBackward<T>{}, q);
      const std::vector<T> sums = gw.Get();
      if (run == 0) {
        Compare("rms_norm_grad.x", where, grad.Get(), rb.out, rtol, atol, &rb.out_mag);
        Compare("rms_norm_grad.w", where, sums, rb.col0, rtol, Dtype<Acc>::kAtol, &rb.mag0);
        first = sums;
      } else if (cols > 0 && std::memcmp(first.data(), sums.data(), cols * sizeof(T)) != 0) {
        std::printf("MISMATCH rms_norm_grad.w %s: two runs differ\n", where.c_str());
        ++g_failures;
      }
    }
  }
  // layer_norm
  {
    out.Poison();
    Buffer<Acc> mean(rows), rstd(rows);
    mean.Poison();
    rstd.Poison();
    Pointers<T, 3, 1, 2> p;
    p.in[0] = dx.ptr;
    p.in[1] = dw.ptr;
    p.in[2] = db.ptr;
    p.out[0] = out.ptr;
    p.row_out[0] = mean.ptr;
    p.row_out[1] = rstd.ptr;
    p.rows = rows;
    p.cols = cols;
    Launch<LayerNormForward<T>, Elem, Col, Col>(LayerNormForward<T>{Acc(1e-5)}, p);
    const Ref r = LayerNormRef(x, w, b, rows, cols, 1e-5);
    Compare("layer_norm", where, out.Get(), r.out, rtol, atol);
    Compare("layer_norm.mean", where, mean.Get(), r.rows0, Dtype<Acc>::kRtol * 10,
            Dtype<Acc>::kAtol);
    Compare("layer_norm.rstd", where, rstd.Get(), r.rows1, Dtype<Acc>::kRtol * 100, 0);
    std::vector<Acc> hm(rows), hr(rows);
    std::vector<double> ms(rows), rs(rows);
    for (int64_t i = 0; i < rows; ++i) {
      hm[i] = Acc(r.rows0[i]);
      hr[i] = Acc(r.rows1[i]);
      ms[i] = double(hm[i]);
      rs[i] = double(hr[i]);
    }
    Buffer<Acc> saved_mean(hm), saved_rstd(hr);
    const Ref rb = LayerNormBackRef(x, w, ms, rs, g, rows, cols);
    std::vector<T> first_w, first_b;
    for (int run = 0; run < 2; ++run) {
      grad.Poison();
      gw.Poison();
      gb.Poison();
      Pointers<T, 5, 1, 0, 2> q;
      q.in[0] = dx.ptr;
      q.in[1] = dw.ptr;
      q.in[2] = saved_mean.ptr;
      q.in[3] = saved_rstd.ptr;
      q.in[4] = dg.ptr;
      q.out[0] = grad.ptr;
      q.col_sum[0] = gw.ptr;
      q.col_sum[1] = gb.ptr;
      q.rows = rows;
      q.cols = cols;
      Launch<LayerNormBackward<T>, Elem, Col, RowStat, RowStat, Elem>(LayerNormBackward<T>{}, q);
      const std::vector<T> sw = gw.Get(), sb = gb.Get();
      if (run == 0) {
        Compare("layer_norm_grad.x", where, grad.Get(), rb.out, rtol, atol, &rb.out_mag);
        Compare("layer_norm_grad.w", where, sw, rb.col0, rtol, Dtype<Acc>::kAtol, &rb.mag0);
        Compare("layer_norm_grad.b", where, sb, rb.col1, rtol, Dtype<Acc>::kAtol, &rb.mag1);
        first_w = sw;
        first_b = sb;
      } else if (cols > 0 && (std::memcmp(first_w.data(), sw.data(), cols * sizeof(T)) != 0 ||
                              std::memcmp(first_b.data(), sb.data(), cols * sizeof(T)) != 0)) {
        std::printf("MISMATCH layer_norm_grad.w/b %s: two runs differ\n", where.c_str());
        ++g_failures;
      }
    }
  }
}

template <typename T>
void CheckAll(bool quick) {
  struct Shape {
    int64_t rows, cols;
  };
  // Every schedule: parts of a warp (1..16 vectors), a warp (up to 8 vectors per lane), a block
  // (128..1024 threads), the loop; element paths for odd lengths; 0 rows and 0 cols.
  // The first 12 are the quick set; the two big ones give every block several rows (prefetch).
  std::vector<Shape> shapes = {{5, 1},    {9, 7},      {33, 128},   {17, 1000}, {6, 4096},
                               {3, 32768}, {0, 128},   {0, 0},      {4, 0},     {3000, 256},
                               {600, 4096}, {300, 32768},
                               {2000, 96}, {77, 24},   {129, 8},    {65, 2048}, {40, 1536},
                               {5, 8192},  {4, 16384}, {2, 65536},  {2, 100000}, {3, 3001},
                               {70, 513},  {1100, 64}, {300, 40},   {2, 270000}};
  if (quick) shapes.resize(12);
  for (const Shape& s : shapes) {
    CheckShape<T>(s.rows, s.cols, 0, s.rows >= 2 && s.cols >= 1);
  }
  CheckShape<T>(19, 128, 1, true);   // misaligned pointers: element path
  CheckShape<T>(7, 4096, 1, false);
}

// ---- timing --------------------------------------------------------------------------------
struct Timer {
  cudaEvent_t start, stop;
  Timer() {
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
  }
  ~Timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  template <typename Body>
  double Ms(Body&& body, int iters) {
    for (int i = 0; i < 3; ++i) body();
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i) body();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / iters;
  }
};

// Timing filters (--op, --shape, --dtype; empty: all) and a fixed iteration count (--iters, 0: by
// size), so a profiler (ncu) can take one kernel: the copy and the ops left out are not run.
std::string g_op, g_shape, g_dtype;
int g_iters = 0;

// Whether op is timed (TimeShape has already left out the shapes and dtypes not asked for).
bool Selected(const char* op) { return g_op.empty() || g_op == op; }

template <typename F, typename... Roles, typename P>
double TimeOp(Timer& timer, const F& f, const P& p, int iters) {
  const std::size_t bytes = opgen::rowwise::WorkspaceBytes<F, Roles...>(p);
  void* workspace = nullptr;
  if (bytes) CHECK(cudaMalloc(&workspace, bytes));
  const double ms = timer.Ms([&] { opgen::rowwise::Run<F, Roles...>(f, p, workspace, nullptr); },
                             iters);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  cudaFree(workspace);
  return ms;
}

void Report(const char* op, int64_t rows, int64_t cols, const char* dtype, double ms,
            double bytes, double copy_gbs, double target) {
  const double gbs = bytes / ms / 1e6;
  if (copy_gbs <= 0) {  // --op: no copy timed
    std::printf("%-18s %7lldx%-6lld %-9s %8.4f ms %7.0f GB/s\n", op, (long long)rows,
                (long long)cols, dtype, ms, gbs);
    return;
  }
  const double ratio = gbs / copy_gbs;
  std::printf("%-18s %7lldx%-6lld %-9s %8.4f ms %7.0f GB/s  copy %5.0f  ratio %.3f  %s\n", op,
              (long long)rows, (long long)cols, dtype, ms, gbs, copy_gbs, ratio,
              ratio >= target ? "ok" : "MISS");
}

template <typename T>
void TimeShape(int64_t rows, int64_t cols) {
  using Acc = opgen::OpMathT<T>;
  const int64_t n = rows * cols;
  const char* name = Dtype<T>::kName;
  if (!g_shape.empty() && g_shape != std::to_string(rows) + "x" + std::to_string(cols)) return;
  if (!g_dtype.empty() && g_dtype != name) return;
  Buffer<T> x(Values<T>(n, 1)), g(Values<T>(n, 2)), y(n), dx(n), w(Values<T>(cols, 3, 0.5, 1.5)),
      b(Values<T>(cols, 4)), gw(cols), gb(cols);
  Buffer<Acc> mean(rows), rstd(rows);
  Timer timer;
  const double bytes = double(n) * sizeof(T);
  const int iters = g_iters > 0 ? g_iters : std::max(50, int(1e10 / (4 * bytes)));
  double copy_gbs = 0;  // with --op the copy is not timed (Report prints no ratio)
  if (g_op.empty()) {
    const double copy_ms = timer.Ms([&] {
      cudaMemcpyAsync(y.ptr, x.ptr, n * sizeof(T), cudaMemcpyDeviceToDevice, nullptr);
    }, iters);
    copy_gbs = 2 * bytes / copy_ms / 1e6;
    std::printf("%-18s %7lldx%-6lld %-9s %8.4f ms %7.0f GB/s\n", "copy", (long long)rows,
                (long long)cols, name, copy_ms, copy_gbs);
  }
  {
    Pointers<T, 1, 1> p;
    p.in[0] = x.ptr;
    p.out[0] = y.ptr;
    p.rows = rows;
    p.cols = cols;
    if (Selected("softmax"))
      Report("softmax", rows, cols, name,
           TimeOp<SoftmaxForward<T>, Elem>(timer, SoftmaxForward<T>{Acc(1)}, p, iters), 2 * bytes,
           copy_gbs, 0.85);
    Pointers<T, 2, 1> q;
    q.in[0] = y.ptr;
    q.in[1] = g.ptr;
    q.out[0] = dx.ptr;
    q.rows = rows;
    q.cols = cols;
    if (Selected("softmax_grad"))
      Report("softmax_grad", rows, cols, name,
           TimeOp<SoftmaxBackward<T>, Elem, Elem>(timer, SoftmaxBackward<T>{Acc(1)}, q, iters),
           3 * bytes, copy_gbs, 0.75);
  }
  {
    Pointers<T, 2, 1, 1> p;
    p.in[0] = x.ptr;
    p.in[1] = w.ptr;
    p.out[0] = y.ptr;
    p.row_out[0] = rstd.ptr;
    p.rows = rows;
    p.cols = cols;
    if (Selected("rms_norm"))
      Report("rms_norm", rows, cols, name,
           TimeOp<RmsNormForward<T>, Elem, Col>(timer, RmsNormForward<T>{Acc(1e-6)}, p, iters),
           2 * bytes, copy_gbs, 0.85);
    Pointers<T, 4, 1, 0, 1> q;
    q.in[0] = x.ptr;
    q.in[1] = w.ptr;
    q.in[2] = rstd.ptr;
    q.in[3] = g.ptr;
    q.out[0] = dx.ptr;
    q.col_sum[0] = gw.ptr;
    q.rows = rows;
    q.cols = cols;
    if (Selected("rms_norm_grad"))
      Report("rms_norm_grad", rows, cols, name,
           TimeOp<RmsNormBackward<T>, Elem, Col, RowStat, Elem>(timer, RmsNormBackward<T>{}, q,
                                                                 iters),
           3 * bytes, copy_gbs, 0.75);
  }
  {
    Pointers<T, 3, 1, 2> p;
    p.in[0] = x.ptr;
    p.in[1] = w.ptr;
    p.in[2] = b.ptr;
    p.out[0] = y.ptr;
    p.row_out[0] = mean.ptr;
    p.row_out[1] = rstd.ptr;
    p.rows = rows;
    p.cols = cols;
    if (Selected("layer_norm"))
      Report("layer_norm", rows, cols, name,
           TimeOp<LayerNormForward<T>, Elem, Col, Col>(timer, LayerNormForward<T>{Acc(1e-5)}, p,
                                                       iters),
           2 * bytes, copy_gbs, 0.85);
    Pointers<T, 5, 1, 0, 2> q;
    q.in[0] = x.ptr;
    q.in[1] = w.ptr;
    q.in[2] = mean.ptr;
    q.in[3] = rstd.ptr;
    q.in[4] = g.ptr;
    q.out[0] = dx.ptr;
    q.col_sum[0] = gw.ptr;
    q.col_sum[1] = gb.ptr;
    q.rows = rows;
    q.cols = cols;
    if (Selected("layer_norm_grad"))
      Report("layer_norm_grad", rows, cols, name,
           TimeOp<LayerNormBackward<T>, Elem, Col, RowStat, RowStat, Elem>(
               timer, LayerNormBackward<T>{}, q, iters),
           3 * bytes, copy_gbs, 0.75);
  }
}

template <typename T>
void TimeAll() {
  const int64_t shapes[][2] = {{4096, 4096}, {16384, 1024}, {65536, 256}, {1024, 32768},
                               {262144, 128}, {2048, 16384}};
  for (const auto& s : shapes) TimeShape<T>(s[0], s[1]);
}

int main(int argc, char** argv) {
  bool check = true, time = true, quick = false, float_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check-only")) time = false;
    else if (!std::strcmp(argv[i], "--time-only")) check = false;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--float-only")) float_only = true;
    else if (!std::strcmp(argv[i], "--op") && i + 1 < argc) g_op = argv[++i];
    else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) g_shape = argv[++i];
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) g_dtype = argv[++i];
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) g_iters = std::atoi(argv[++i]);
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %d MB; knobs threads=%d lane_vecs=%d reg_bytes=%d "
              "block_vecs=%d loop_threads=%d waves=%d sum_blocks=%d\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              opgen::rowwise::kRowThreads, opgen::rowwise::kLaneVecs, opgen::rowwise::kRegBytes,
              opgen::rowwise::kBlockVecs, opgen::rowwise::kLoopThreads, opgen::rowwise::kWaves,
              opgen::rowwise::kSumBlocks);
  // ROWWISE_BENCH_FLOAT_ONLY: float32 only, for a quicker build (tests/test_rowwise_runtime.py).
  if (float_only) std::printf("float32 only\n");
  if (check) {
    CheckAll<float>(quick);
#ifndef ROWWISE_BENCH_FLOAT_ONLY
    if (!float_only) {
      CheckAll<__nv_bfloat16>(quick);
      CheckAll<__half>(quick);
      CheckAll<double>(quick);
    }
#endif
    std::printf("checks: %d comparisons, %d mismatches\n", g_checks, g_failures);
  }
  if (time) {  // timed even after a mismatch (the exit status reports it)
    TimeAll<float>();
#ifndef ROWWISE_BENCH_FLOAT_ONLY
    if (!float_only) {
      TimeAll<__nv_bfloat16>();
      TimeAll<__half>();
    }
#endif
  }
  return g_failures == 0 ? 0 : 1;
}
