// The generated row-wise examples' functors (examples/softmax, rms_norm, layer_norm, add_rms_norm:
// csrc/<op>.h as opgen generated them) run by the row-wise launcher without Paddle, beside the
// hand-written functors of scripts/gpu/rowwise_ops.h (what scripts/gpu/rowwise_bench.cu times),
// in one run: scripts/gpu/rowwise_examples.sh builds and runs it. It tells a slow generated op
// apart from a slow launcher, and both from the cost of the call through Paddle (opgen bench).
//   rowwise_examples [--plan] [--quick] [--op OP] [--dtype DTYPE] [--shape ROWSxCOLS]
// For each op, direction (forward, backward), dtype (float32, bfloat16, float16) and anchor shape
// of issue 13: the schedule the launcher picks, then ms and GB/s of the generated functor, of
// the hand-written one (where there is one) and of a cudaMemcpyAsync of the same bytes, with CUDA
// events over back-to-back launches, inputs rotated through enough sets to overflow the L2 cache;
// the ratios to the copy; gen/hand; and the largest difference between the two functors'
// per-element outputs on the same inputs (relative to the largest output). GB/s count the
// per-element tensors read and written ([cols] and [rows] tensors left out, as rowwise_bench.cu
// does). --plan prints the schedules only (no GPU needed); --quick times one shape per dtype;
// --op (softmax, ..., a backward as softmax_grad), --dtype and --shape keep one op, dtype or
// shape (scripts/gpu/rowwise_ncu.sh profiles one case of this binary as of rowwise_bench's).
// Exits 1 when a generated and a hand-written functor disagree beyond the dtype's tolerance.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "opgen/rowwise.cuh"
#include "rowwise_ops.h"
// The examples' generated headers, copied next to scripts/gpu/rowwise_shim by the script.
#include "add_rms_norm.h"
#include "layer_norm.h"
#include "rms_norm.h"
#include "softmax.h"

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t e = (call);                                                           \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace rw = opgen::rowwise;
using rw::Col;
using rw::Elem;
using rw::Out;
using rw::OutRole;
using rw::RoleList;
using rw::RowIn;
using rw::RowStat;

template <typename T>
struct Dtype;
template <>
struct Dtype<float> {
  static constexpr const char* kName = "float32";
  static constexpr double kTol = 1e-5;
};
template <>
struct Dtype<__nv_bfloat16> {
  static constexpr const char* kName = "bfloat16";
  static constexpr double kTol = 1.6e-2;
};
template <>
struct Dtype<__half> {
  static constexpr const char* kName = "float16";
  static constexpr double kTol = 2e-3;
};

// ---- the hand-written functors' launch descriptions, in the generated Io's form -------------
struct HandSoftmaxForwardIo {
  using Roles = RoleList<Elem>;
  static constexpr const char* kNames[] = {"x"};
  static constexpr bool kReads[] = {true};
  static constexpr Out kOuts[] = {{OutRole::kElem, -1}};
  static constexpr int kOut = 1, kRowOut = 0, kColSum = 0;
};
struct HandSoftmaxBackwardIo {
  using Roles = RoleList<Elem, Elem>;
  static constexpr const char* kNames[] = {"out", "grad_out"};
  static constexpr bool kReads[] = {true, true};
  static constexpr Out kOuts[] = {{OutRole::kElem, 0}};
  static constexpr int kOut = 1, kRowOut = 0, kColSum = 0;
};
struct HandRmsNormForwardIo {
  using Roles = RoleList<Elem, Col>;
  static constexpr const char* kNames[] = {"x", "weight"};
  static constexpr bool kReads[] = {true, true};
  static constexpr Out kOuts[] = {{OutRole::kElem, -1}, {OutRole::kRow, -1}};
  static constexpr int kOut = 1, kRowOut = 1, kColSum = 0;
};
struct HandRmsNormBackwardIo {  // takes the saved rstd, where the generated one recomputes it
  using Roles = RoleList<Elem, Col, RowStat, Elem>;
  static constexpr const char* kNames[] = {"x", "weight", "rstd", "grad_out"};
  static constexpr bool kReads[] = {true, true, true, true};
  static constexpr Out kOuts[] = {{OutRole::kElem, 0}, {OutRole::kColSum, 1}};
  static constexpr int kOut = 1, kRowOut = 0, kColSum = 1;
};
struct HandLayerNormForwardIo {
  using Roles = RoleList<Elem, Col, Col>;
  static constexpr const char* kNames[] = {"x", "weight", "bias"};
  static constexpr bool kReads[] = {true, true, true};
  static constexpr Out kOuts[] = {{OutRole::kElem, -1}, {OutRole::kRow, -1}, {OutRole::kRow, -1}};
  static constexpr int kOut = 1, kRowOut = 2, kColSum = 0;
};
struct HandLayerNormBackwardIo {
  using Roles = RoleList<Elem, Col, RowStat, RowStat, Elem>;
  static constexpr const char* kNames[] = {"x", "weight", "mean", "rstd", "grad_out"};
  static constexpr bool kReads[] = {true, true, true, true, true};
  static constexpr Out kOuts[] = {{OutRole::kElem, 0}, {OutRole::kColSum, 1},
                                  {OutRole::kColSum, 1}};
  static constexpr int kOut = 1, kRowOut = 0, kColSum = 2;
};

// ---- buffers ---------------------------------------------------------------------------------
uint32_t Salt(const char* name) {  // the same name gets the same values in every functor
  uint32_t h = 2166136261u;
  for (const char* c = name; *c; ++c) h = (h ^ uint8_t(*c)) * 16777619u;
  return h;
}

template <typename S>
__global__ void Fill(S* p, int64_t n, uint32_t salt, float lo, float hi) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ salt ^ uint32_t(i >> 32) * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<S>(lo + (hi - lo) * float(h >> 8) * (1.0f / 16777216.0f));
  }
}

struct Memory {  // every allocation of a case, freed at its end
  std::vector<void*> blocks;
  void* Get(std::size_t bytes) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1));
    blocks.push_back(p);
    return p;
  }
  ~Memory() {
    for (void* p : blocks) cudaFree(p);
  }
};

// One functor's tensors for `sets` rotations: the pointers of each set, and where its first
// per-element output is.
template <typename T, class Io>
struct Tensors {
  using Acc = opgen::OpMathT<T>;
  static constexpr int kIn = int(std::size(Io::kNames));
  using P = rw::Pointers<T, kIn, Io::kOut, Io::kRowOut, Io::kColSum>;
  std::vector<P> sets;
  int elem_read = 0;  // per-element tensors read and written per call
  int elem_written = Io::kOut;

  template <class... Roles>
  Tensors(Memory& mem, int64_t rows, int64_t cols, int count, RoleList<Roles...>) {
    const int64_t n = rows * cols;
    const bool is_elem[] = {std::is_same_v<Roles, Elem>...};
    const bool is_col[] = {std::is_same_v<Roles, Col>...};
    const bool is_stat[] = {std::is_same_v<Roles, RowStat>...};
    for (int i = 0; i < kIn; ++i) elem_read += (is_elem[i] && Io::kReads[i]) ? 1 : 0;
    for (int s = 0; s < count; ++s) {
      P p;
      p.rows = rows;
      p.cols = cols;
      for (int i = 0; i < kIn; ++i) {
        const uint32_t salt = Salt(Io::kNames[i]) + 977u * s;
        if (!Io::kReads[i]) {
          p.in[i] = nullptr;
        } else if (is_stat[i]) {
          auto* d = static_cast<Acc*>(mem.Get(rows * sizeof(Acc)));
          Fill<<<1024, 256>>>(d, rows, salt, 0.5f, 1.5f);
          p.in[i] = d;
        } else {
          const int64_t count_i = is_elem[i] ? n : is_col[i] ? cols : rows;
          auto* d = static_cast<T*>(mem.Get(count_i * sizeof(T)));
          const bool positive = !is_elem[i];  // weights, per-row inputs
          Fill<<<1024, 256>>>(d, count_i, salt, positive ? 0.5f : -2.0f, positive ? 1.5f : 2.0f);
          p.in[i] = d;
        }
      }
      int k[3] = {0, 0, 0};
      for (const Out& o : Io::kOuts) {
        switch (o.role) {
          case OutRole::kElem: p.out[k[0]++] = static_cast<T*>(mem.Get(n * sizeof(T))); break;
          case OutRole::kRow: p.row_out[k[1]++] = static_cast<Acc*>(mem.Get(rows * sizeof(Acc)));
            break;
          case OutRole::kColSum: p.col_sum[k[2]++] = static_cast<T*>(mem.Get(cols * sizeof(T)));
            break;
        }
      }
      sets.push_back(p);
    }
    CHECK(cudaDeviceSynchronize());
  }
};

// ---- schedules -------------------------------------------------------------------------------
template <class F, class P, class... Roles>
std::string Schedule(const P& p, RoleList<Roles...>) {
  using S = rw::detail::Schedules<F, P, Roles...>;
  char text[200];
  S::With(
      p,
      [&](auto cfg) {
        using Cfg = decltype(cfg);
        const bool staged = rw::detail::kPrefetches<Cfg, P>;
        const char* what = Cfg::kCluster > 1             ? "cluster/row"
                           : Cfg::kLanes == Cfg::kThreads ? "block/row"
                           : Cfg::kLanes == 32            ? "warp/row"
                                                          : "lanes/row";
        const int64_t groups = rw::detail::CeilDiv(p.rows, Cfg::kGroups);
        std::snprintf(text, sizeof text,
                      "%-11s vec %d x %d chunks, %4d lanes, %4d threads x %d blocks, %s%lld%s",
                      what, Cfg::kVec, Cfg::kChunks, Cfg::kLanes, Cfg::kThreads, Cfg::kCluster,
                      staged || P::kColumnSums > 0 ? "grid <= resident, " : "grid ",
                      (long long)groups, staged ? " (cp.async prefetch)" : "");
        return 0;
      },
      [&](auto vec) {
        std::snprintf(text, sizeof text, "loop      vec %d, %d threads, %s%lld",
                      decltype(vec)::value, int(S::kLoop),
                      P::kColumnSums > 0 ? "grid <= SMs, " : "grid ", (long long)p.rows);
        return 0;
      });
  return text;
}

// ---- timing ----------------------------------------------------------------------------------
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
  template <typename Body>  // median of 5 batches of `iters` calls; body(i) is call i
  double Ms(Body&& body, int iters) {
    for (int i = 0; i < 5; ++i) body(i);
    std::vector<float> ms;
    for (int r = 0; r < 5; ++r) {
      CHECK(cudaEventRecord(start));
      for (int i = 0; i < iters; ++i) body(i);
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t / iters);
    }
    std::sort(ms.begin(), ms.end());
    return ms[2];
  }
};

constexpr double kFlushBytes = 256.0 * (1 << 20);  // what the rotated sets span at least

template <class F, class P, class... Roles>
std::size_t WorkspaceFor(const P& p, RoleList<Roles...>) {
  return rw::WorkspaceBytes<F, Roles...>(p);
}
template <class F, class P, class... Roles>
cudaError_t RunFor(const F& f, const P& p, void* workspace, RoleList<Roles...>) {
  return rw::Run<F, Roles...>(f, p, workspace, nullptr);
}

// The schedule for 256-byte aligned tensors, without a GPU (grids that depend on the blocks an
// SM holds are reported as such).
template <class F, class Io, typename T>
std::string Plan(int64_t rows, int64_t cols) {
  constexpr int kIn = int(std::size(Io::kNames));
  rw::Pointers<T, kIn, Io::kOut, Io::kRowOut, Io::kColSum> p;
  std::uintptr_t fake = 1 << 20;
  for (int i = 0; i < kIn; ++i) {
    p.in[i] = Io::kReads[i] ? reinterpret_cast<const void*>(fake += 1 << 30) : nullptr;
  }
  for (int k = 0; k < Io::kOut; ++k) p.out[k] = reinterpret_cast<T*>(fake += 1 << 30);
  p.rows = rows;
  p.cols = cols;
  return Schedule<F>(p, typename Io::Roles{});
}

template <class F, class Io, typename T>
struct Result {
  double ms = 0;
  double bytes = 0;
  std::string schedule;
  std::vector<T> first_out;  // the first per-element output of the first set, for comparison
};

template <class F, class Io, typename T>
Result<F, Io, T> Run(const F& f, int64_t rows, int64_t cols, bool time = true) {
  Memory mem;
  const int64_t n = rows * cols;
  int elem = 0;
  for (int i = 0; i < int(std::size(Io::kNames)); ++i) elem += Io::kReads[i] ? 1 : 0;
  elem += Io::kOut;
  const double set_bytes = double(n) * sizeof(T) * elem;
  const int sets = time ? std::max(1, std::min(8, int(std::ceil(kFlushBytes / set_bytes)))) : 1;
  Tensors<T, Io> t(mem, rows, cols, sets, typename Io::Roles{});
  Result<F, Io, T> r;
  r.schedule = Schedule<F>(t.sets[0], typename Io::Roles{});
  r.bytes = double(n) * sizeof(T) * (t.elem_read + t.elem_written);
  std::vector<void*> workspace(sets, nullptr);
  for (int s = 0; s < sets; ++s) {
    const std::size_t bytes = WorkspaceFor<F>(t.sets[s], typename Io::Roles{});
    if (bytes > 0) workspace[s] = mem.Get(bytes);
  }
  auto run = [&](int i) {
    return RunFor(f, t.sets[i % sets], workspace[i % sets], typename Io::Roles{});
  };
  CHECK(run(0));
  CHECK(cudaDeviceSynchronize());
  r.first_out.resize(n);
  CHECK(cudaMemcpy(r.first_out.data(), t.sets[0].out[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  if (time) {
    Timer timer;
    const int iters = std::max(20, int(4e9 / r.bytes));
    r.ms = timer.Ms([&](int i) { run(i); }, iters);
    CHECK(cudaGetLastError());
  }
  return r;
}

template <typename T>
double CopyGbs(int64_t n) {  // a device-to-device copy of n elements, rotated as above
  Memory mem;
  const double bytes = double(n) * sizeof(T);
  const int sets = std::max(1, std::min(8, int(std::ceil(kFlushBytes / (2 * bytes)))));
  std::vector<void*> src, dst;
  for (int s = 0; s < sets; ++s) {
    src.push_back(mem.Get(n * sizeof(T)));
    dst.push_back(mem.Get(n * sizeof(T)));
  }
  Timer timer;
  const double ms = timer.Ms([&](int i) {
    cudaMemcpyAsync(dst[i % sets], src[i % sets], n * sizeof(T), cudaMemcpyDeviceToDevice);
  }, std::max(20, int(4e9 / (2 * bytes))));
  return 2 * bytes / ms / 1e6;
}

double MaxDiff(const double* a, const double* b, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(b[i])) scale = std::max(scale, std::fabs(b[i]));
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (!std::isnan(a[i])) diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

int g_failures = 0;
std::string g_op, g_dtype, g_shape;  // --op, --dtype, --shape: empty keeps every one

// One generated functor (and its hand-written counterpart, HandF void when there is none).
template <typename T, class GenF, class GenIo, class HandF, class HandIo>
void Case(const char* op, const char* dir, int64_t rows, int64_t cols, double copy_gbs,
          const GenF& gen, const HandF* hand, bool plan_only) {
  if (!g_op.empty() && g_op != std::string(op) + (std::strcmp(dir, "backward") ? "" : "_grad")) {
    return;
  }
  char shape[32];
  std::snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)cols);
  if (plan_only) {
    std::printf("%-13s %-8s %-9s %-12s %s\n", op, dir, Dtype<T>::kName, shape,
                Plan<GenF, GenIo, T>(rows, cols).c_str());
    return;
  }
  const auto g = Run<GenF, GenIo, T>(gen, rows, cols, true);
  const double g_gbs = g.bytes / g.ms / 1e6;
  std::printf("%-13s %-8s %-9s %-12s gen %8.4f ms %5.0f GB/s %.3f", op, dir, Dtype<T>::kName, shape,
              g.ms, g_gbs, g_gbs / copy_gbs);
  std::string hand_schedule;
  if constexpr (!std::is_void_v<HandF>) {
    const auto h = Run<HandF, HandIo, T>(*hand, rows, cols, true);
    hand_schedule = h.schedule;
    const double h_gbs = h.bytes / h.ms / 1e6;
    std::vector<double> a(g.first_out.size()), b(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = double(float(g.first_out[i]));
      b[i] = double(float(h.first_out[i]));
    }
    const double diff = MaxDiff(a.data(), b.data(), a.size());
    const bool ok = diff <= Dtype<T>::kTol;
    if (!ok) ++g_failures;
    std::printf(" | hand %8.4f ms %.3f | gen/hand %.3f | diff %.1e%s\n", h.ms, h_gbs / copy_gbs,
                h.ms / g.ms, diff, ok ? "" : " MISMATCH");
  } else {
    std::printf(" | (no hand-written functor)\n");
  }
  std::printf("%-13s %-8s %-9s %-12s   schedule: %s\n", "", "", "", "", g.schedule.c_str());
  if (!hand_schedule.empty() && hand_schedule != g.schedule) {
    std::printf("%-13s %-8s %-9s %-12s   hand's:   %s\n", "", "", "", "", hand_schedule.c_str());
  }
}

template <typename T>
void Shape(int64_t rows, int64_t cols, bool plan_only) {
  using Acc = opgen::OpMathT<T>;
  const double copy_gbs = plan_only ? 0 : CopyGbs<T>(rows * cols);
  if (!plan_only) {
    std::printf("copy          -        %-9s %lldx%-6lld %5.0f GB/s\n", Dtype<T>::kName,
                (long long)rows, (long long)cols, copy_gbs);
  }
  const double scale = 1.0, eps_rms = 1e-6, eps_ln = 1e-5;
  {
    const SoftmaxForward<T> hf{Acc(scale)};
    Case<T, softmax::Forward<T>, softmax::ForwardIo, SoftmaxForward<T>, HandSoftmaxForwardIo>(
        "softmax", "forward", rows, cols, copy_gbs, softmax::Forward<T>(scale), &hf, plan_only);
    const SoftmaxBackward<T> hb{Acc(scale)};
    Case<T, softmax::Backward<T>, softmax::BackwardIo, SoftmaxBackward<T>, HandSoftmaxBackwardIo>(
        "softmax", "backward", rows, cols, copy_gbs, softmax::Backward<T>(scale), &hb, plan_only);
  }
  {
    const RmsNormForward<T> hf{Acc(eps_rms)};
    Case<T, rms_norm::Forward<T>, rms_norm::ForwardIo, RmsNormForward<T>, HandRmsNormForwardIo>(
        "rms_norm", "forward", rows, cols, copy_gbs, rms_norm::Forward<T>(eps_rms), &hf,
        plan_only);
    // The hand-written backward takes the saved rstd (random here): timed, not compared.
    Case<T, rms_norm::Backward<T>, rms_norm::BackwardIo, void, void>(
        "rms_norm", "backward", rows, cols, copy_gbs, rms_norm::Backward<T>(eps_rms),
        static_cast<const void*>(nullptr), plan_only);
  }
  {
    const LayerNormForward<T> hf{Acc(eps_ln)};
    Case<T, layer_norm::Forward<T>, layer_norm::ForwardIo, LayerNormForward<T>,
         HandLayerNormForwardIo>("layer_norm", "forward", rows, cols, copy_gbs,
                                 layer_norm::Forward<T>(eps_ln), &hf, plan_only);
    const LayerNormBackward<T> hb{};
    Case<T, layer_norm::Backward<T>, layer_norm::BackwardIo, LayerNormBackward<T>,
         HandLayerNormBackwardIo>("layer_norm", "backward", rows, cols, copy_gbs,
                                  layer_norm::Backward<T>(), &hb, plan_only);
  }
  Case<T, add_rms_norm::Forward<T>, add_rms_norm::ForwardIo, void, void>(
      "add_rms_norm", "forward", rows, cols, copy_gbs, add_rms_norm::Forward<T>(eps_rms),
      static_cast<const void*>(nullptr), plan_only);
  Case<T, add_rms_norm::Backward<T>, add_rms_norm::BackwardIo, void, void>(
      "add_rms_norm", "backward", rows, cols, copy_gbs, add_rms_norm::Backward<T>(eps_rms),
      static_cast<const void*>(nullptr), plan_only);
}

template <typename T>
void All(bool plan_only, bool quick) {
  if (!g_dtype.empty() && g_dtype != Dtype<T>::kName) return;
  const int64_t shapes[][2] = {{4096, 4096}, {16384, 1024}, {65536, 256}, {1024, 32768},
                               {262144, 128}};
  for (const auto& s : shapes) {
    if (!g_shape.empty() && g_shape != std::to_string(s[0]) + "x" + std::to_string(s[1])) {
      continue;
    }
    Shape<T>(s[0], s[1], plan_only);
    if (quick) break;
  }
}

int main(int argc, char** argv) {
  bool plan_only = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--plan")) plan_only = true;
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (i + 1 < argc && !std::strcmp(argv[i], "--op")) g_op = argv[++i];
    if (i + 1 < argc && !std::strcmp(argv[i], "--dtype")) g_dtype = argv[++i];
    if (i + 1 < argc && !std::strcmp(argv[i], "--shape")) g_shape = argv[++i];
  }
  if (!plan_only) {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize >> 20);
  }
  std::printf("knobs threads=%d lane_vecs=%d reg_bytes=%d block_vecs=%d loop_threads=%d "
              "prefetch=%d\n", rw::kRowThreads, rw::kLaneVecs, rw::kRegBytes, rw::kBlockVecs,
              rw::kLoopThreads, int(rw::kPrefetch));
  All<float>(plan_only, quick);
  All<__nv_bfloat16>(plan_only, quick);
  All<__half>(plan_only, quick);
  if (!plan_only) std::printf("generated vs hand-written: %d mismatches\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
