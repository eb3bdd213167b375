// Checks and times examples/embedding's CUDA kernels (examples/embedding/csrc/embedding_kernels.cuh)
// on their own, without Paddle (scripts/gpu/embedding.sh builds and runs it):
//   nvcc -O3 -std=c++17 -arch=sm_90 -I$CUDA_HOME/include/cccl -Itemplates/common/csrc \
//     -Iexamples/embedding/csrc scripts/gpu/embedding_bench.cu -o /tmp/embedding_bench
// First the gather and both scatter-adds against a host reference in float32, float64, float16
// and bfloat16 with int32 and int64 ids: empty, one id, odd row sizes, misaligned tables, a
// padding row, out-of-range ids (zero rows and the id check's verdict, rows of 0 bytes
// included), every id equal, runs of ids around and past EMBEDDING_PIECE_ROWS, two ids; the
// sorted backward twice for bit-identical gradients. Then times ids [65536] against a
// device-to-device copy of the same bytes in the same run: uniform ids (D = 1024 and 256), ids
// drawn by Zipf's law, and two ids (token types). Exits 1 on any mismatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "embedding_kernels.cuh"

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t e = (call);                                                           \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

using embedding::cuda::BadId;
int failures = 0;

template <typename T> float ToF(T x) { return static_cast<float>(x); }
template <> float ToF(__half x) { return __half2float(x); }
template <> float ToF(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> T FromF(float x) { return static_cast<T>(x); }
template <> __half FromF(float x) { return __float2half(x); }
template <> __nv_bfloat16 FromF(float x) { return __float2bfloat16(x); }
// The host reference sums in double, reading float64 values exactly.
template <typename T> double ToD(T x) { return ToF(x); }
template <> double ToD(double x) { return x; }
template <typename T> const char* Name();
template <> const char* Name<float>() { return "float32"; }
template <> const char* Name<double>() { return "float64"; }
template <> const char* Name<__half>() { return "float16"; }
template <> const char* Name<__nv_bfloat16>() { return "bfloat16"; }

template <typename T>
T* Device(const std::vector<T>& host, int64_t shift = 0) {
  T* p = nullptr;
  CHECK(cudaMalloc(&p, (host.size() + shift + 1) * sizeof(T)));
  if (!host.empty()) {
    CHECK(cudaMemcpy(p + shift, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return p;
}
template <typename T>
std::vector<T> Host(const T* p, int64_t n) {
  std::vector<T> host(n);
  if (n > 0) CHECK(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL %s\n", what.c_str());
    ++failures;
  }
}

// One case: forward and both backward paths against the host.
template <typename T, typename Id>
void CheckCase(int64_t n, int64_t rows, int64_t d, int64_t padding, int64_t shift, bool bad,
               bool all_equal) {
  const std::string what = std::string(Name<T>()) + (sizeof(Id) == 4 ? " int32" : " int64") +
                           " n=" + std::to_string(n) + " V=" + std::to_string(rows) +
                           " D=" + std::to_string(d) + " pad=" + std::to_string(padding) +
                           " shift=" + std::to_string(shift) + (bad ? " bad-id" : "") +
                           (all_equal ? " all-equal" : "");
  std::mt19937_64 rng(n * 131 + rows * 7 + d);
  std::vector<Id> ids(n);
  for (auto& id : ids) id = all_equal ? Id(rows / 2) : static_cast<Id>(rng() % rows);
  if (padding >= 0 && n > 2) ids[1] = static_cast<Id>(padding);
  if (bad && n > 0) ids[n - 1] = static_cast<Id>(rows + 5);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<T> table(rows * d), grad_out(n * d);
  for (auto& x : table) x = FromF<T>(uniform(rng));
  for (auto& x : grad_out) x = FromF<T>(uniform(rng));

  Id* d_ids = Device(ids);
  T* d_table_base = Device(table, shift);
  CHECK(cudaMemcpy(d_table_base + shift, table.data(), table.size() * sizeof(T),
                   cudaMemcpyHostToDevice));
  T* d_out = nullptr;
  CHECK(cudaMalloc(&d_out, (n * d + 1) * sizeof(T)));
  CHECK(cudaMemset(d_out, 0xFF, (n * d + 1) * sizeof(T)));
  // As the op runs it: the gather checks the ids and the host waits for its verdict.
  cudaError_t setup = cudaSuccess;
  embedding::cuda::IdCheck* check = embedding::cuda::IdCheck::For(0, &setup);
  CHECK(setup);
  BadId flag{};
  if (n > 0) {
    const embedding::cuda::CheckArgs checked = check->Next();
    CHECK(embedding::cuda::Gather(d_ids, n, d_table_base + shift, rows, d * int64_t(sizeof(T)),
                                  padding, d_out, checked, 0, 0));
    CHECK(check->Wait(checked, 0, &flag));
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<T> out = Host(d_out, n * d + 1);
  bool ok = true;
  for (int64_t i = 0; i < n && ok; ++i) {
    const int64_t id = ids[i];
    for (int64_t c = 0; c < d; ++c) {
      const bool zero = id < 0 || id >= rows || id == padding;
      const T want = zero ? FromF<T>(0) : table[id * d + c];
      if (std::memcmp(&out[i * d + c], &want, sizeof(T)) != 0) ok = false;
    }
  }
  unsigned char guard[sizeof(T)];
  std::memcpy(guard, &out[n * d], sizeof(T));
  Expect(ok, "forward " + what);
  Expect(std::all_of(guard, guard + sizeof(T), [](unsigned char b) { return b == 0xFF; }),
         "forward wrote past the end " + what);
  Expect(bad ? (flag.position_plus_one == static_cast<unsigned long long>(n) &&
                flag.id == rows + 5)
             : flag.position_plus_one == 0,
         "id check " + what);
  // Unchecked: the same rows.
  CHECK(cudaMemset(d_out, 0xFF, (n * d + 1) * sizeof(T)));
  CHECK(embedding::cuda::Gather(d_ids, n, d_table_base + shift, rows, d * int64_t(sizeof(T)),
                                padding, d_out, embedding::cuda::CheckArgs{}, 0, 0));
  CHECK(cudaDeviceSynchronize());
  const std::vector<T> unchecked = Host(d_out, n * d + 1);
  Expect(std::memcmp(unchecked.data(), out.data(), (n * d + 1) * sizeof(T)) == 0,
         "unchecked forward " + what);
  if (d == 0) {  // the check alone (no rows to copy); the backward needs rows
    CHECK(cudaFree(d_ids));
    CHECK(cudaFree(d_table_base));
    CHECK(cudaFree(d_out));
    return;
  }

  // Backward: host sums in double.
  std::vector<double> want(rows * d, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= rows || id == padding) continue;
    for (int64_t c = 0; c < d; ++c) want[id * d + c] += ToD(grad_out[i * d + c]);
  }
  T* d_grad_out = Device(grad_out);
  T* d_grad = nullptr;
  CHECK(cudaMalloc(&d_grad, rows * d * sizeof(T)));
  void* workspace = nullptr;
  CHECK(cudaMalloc(&workspace, embedding::cuda::SortedWorkspaceBytes<T>(n, d)));
  const double tol = std::is_same_v<T, double> ? 1e-12 : std::is_same_v<T, float> ? 1e-5
                     : std::is_same_v<T, __half> ? 2e-3 : 1e-2;
  std::vector<T> first;
  for (int deterministic = 0; deterministic < 3; ++deterministic) {
    CHECK(cudaMemset(d_grad, 0x7F, rows * d * sizeof(T)));
    CHECK((embedding::cuda::ScatterAdd<T, Id>(d_ids, n, d_grad_out, rows, d, padding, d_grad,
                                              deterministic > 0, workspace, 0, 0)));
    CHECK(cudaDeviceSynchronize());
    std::vector<T> got = Host(d_grad, rows * d);
    bool close = true;
    for (int64_t k = 0; k < rows * d && close; ++k) {
      const double g = ToD(got[k]);
      if (!(std::fabs(g - want[k]) <= tol * (1 + std::fabs(want[k])) * (1 + std::sqrt(n))))
        close = false;
    }
    Expect(close, std::string(deterministic ? "sorted" : "default") + " backward " + what);
    if (deterministic == 1) first = got;
    if (deterministic == 2) {
      Expect(std::memcmp(first.data(), got.data(), got.size() * sizeof(T)) == 0,
             "sorted backward not bit-identical " + what);
    }
  }
  CHECK(cudaFree(d_ids));
  CHECK(cudaFree(d_table_base));
  CHECK(cudaFree(d_out));
  CHECK(cudaFree(d_grad_out));
  CHECK(cudaFree(d_grad));
  CHECK(cudaFree(workspace));
}

template <typename T, typename Id>
void CheckAll() {
  const int64_t shifts[] = {0, 1};
  for (int64_t shift : shifts) {
    CheckCase<T, Id>(0, 10, 8, -1, shift, false, false);
    CheckCase<T, Id>(1, 10, 8, -1, shift, false, false);
    CheckCase<T, Id>(1000, 37, 3, 5, shift, false, false);
    CheckCase<T, Id>(1000, 37, 1, -1, shift, true, false);
    CheckCase<T, Id>(1000, 37, 0, -1, shift, true, false);
    CheckCase<T, Id>(100000, 37, 2, -1, shift, true, false);
    CheckCase<T, Id>(4099, 1000, 64, 0, shift, true, false);
    CheckCase<T, Id>(2048, 500, 1027, 7, shift, false, false);
    CheckCase<T, Id>(20000, 100, 128, -1, shift, false, true);
    // One run around EMBEDDING_PIECE_ROWS (16) and its multiples: one piece, one more, two,
    // several windows.
    for (int64_t n : {16, 17, 30, 31, 32, 33, 64, 65, 129, 200}) {
      CheckCase<T, Id>(n, 10, 8, -1, shift, false, true);
    }
    // Runs of every length around those (about 20 ids a row), then about 64, then two ids.
    CheckCase<T, Id>(4096, 200, 24, -1, shift, false, false);
    CheckCase<T, Id>(3000, 150, 8, 2, shift, true, false);
    CheckCase<T, Id>(4096, 64, 33, 3, shift, false, false);
    CheckCase<T, Id>(20000, 2, 96, -1, shift, false, false);
    CheckCase<T, Id>(20000, 3, 40, 1, shift, true, false);
  }
}

// ---- timing ----------------------------------------------------------------------------------
template <typename Body>
float TimeMs(Body body, int calls) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) body(i);
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < calls; ++i) body(i);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t / calls);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Ids drawn uniformly, or with Zipf's law (id k with weight 1 / (k + 1)), as words are.
template <typename T>
void TimeCase(int64_t n, int64_t rows, int64_t d, bool zipf = false) {
  std::mt19937_64 rng(1);
  std::vector<int64_t> ids(n);
  if (zipf) {
    std::vector<double> weights(rows);
    for (int64_t k = 0; k < rows; ++k) weights[k] = 1.0 / double(k + 1);
    std::discrete_distribution<int64_t> draw(weights.begin(), weights.end());
    for (auto& id : ids) id = draw(rng);
  } else {
    for (auto& id : ids) id = static_cast<int64_t>(rng() % rows);
  }
  std::vector<T> table(rows * d, FromF<T>(0.5f));
  int64_t* d_ids = Device(ids);
  T* d_table = Device(table);
  T *d_out, *d_copy, *d_grad;
  CHECK(cudaMalloc(&d_out, n * d * sizeof(T)));
  CHECK(cudaMalloc(&d_copy, n * d * sizeof(T)));
  CHECK(cudaMalloc(&d_grad, rows * d * sizeof(T)));
  void* workspace;
  CHECK(cudaMalloc(&workspace, embedding::cuda::SortedWorkspaceBytes<T>(n, d)));
  const int64_t row_bytes = d * sizeof(T);
  const double moved = 2.0 * n * row_bytes + n * sizeof(int64_t);
  const int calls = 50;
  const float copy = TimeMs([&](int) {
    CHECK(cudaMemcpyAsync(d_copy, d_out, n * row_bytes, cudaMemcpyDeviceToDevice));
  }, calls);
  const float gather = TimeMs([&](int) {
    CHECK(embedding::cuda::Gather(d_ids, n, d_table, rows, row_bytes, -1, d_out,
                                  embedding::cuda::CheckArgs{}, 0, 0));
  }, calls);
  // As the op runs it: the gather checks the ids, the host waits for the verdict at every call.
  cudaError_t setup = cudaSuccess;
  embedding::cuda::IdCheck* check = embedding::cuda::IdCheck::For(0, &setup);
  CHECK(setup);
  const float checked = TimeMs([&](int) {
    const embedding::cuda::CheckArgs args = check->Next();
    CHECK(embedding::cuda::Gather(d_ids, n, d_table, rows, row_bytes, -1, d_out, args, 0, 0));
    BadId found{};
    CHECK(check->Wait(args, 0, &found));
    if (found.position_plus_one != 0) std::exit(1);
  }, calls);
  const float atomic = TimeMs([&](int) {
    CHECK((embedding::cuda::ScatterAdd<T, int64_t>(d_ids, n, d_out, rows, d, -1, d_grad, false,
                                                   workspace, 0, 0)));
  }, 20);
  const float sorted = TimeMs([&](int) {
    CHECK((embedding::cuda::ScatterAdd<T, int64_t>(d_ids, n, d_out, rows, d, -1, d_grad, true,
                                                   workspace, 0, 0)));
  }, 20);
  const double copy_gbs = 2.0 * n * row_bytes / (copy * 1e6);
  std::printf("%-9s ids [%lld] V=%lld D=%lld%s\n", Name<T>(), (long long)n, (long long)rows,
              (long long)d, zipf ? " (Zipf)" : "");
  std::printf("  copy of out's bytes     %8.4f ms  %6.0f GB/s\n", copy, copy_gbs);
  std::printf("  forward gather          %8.4f ms  %6.0f GB/s  %.3f x copy\n", gather,
              moved / (gather * 1e6), copy / gather);
  std::printf("  forward + id check      %8.4f ms  %6.0f GB/s  %.3f x copy\n", checked,
              moved / (checked * 1e6), copy / checked);
  std::printf("  backward default        %8.4f ms  (%s; zero fill of V*D included)\n", atomic,
              embedding::cuda::UsesSort<T>(d, false) ? "sorted" : "atomics");
  std::printf("  backward sorted         %8.4f ms  (deterministic)\n", sorted);
  std::fflush(stdout);
  for (void* p : {(void*)d_ids, (void*)d_table, (void*)d_out, (void*)d_copy, (void*)d_grad,
                  workspace}) {
    CHECK(cudaFree(p));
  }
}

int main(int argc, char** argv) {
  const bool time_only = argc > 1 && std::strcmp(argv[1], "--time-only") == 0;
  const bool check_only = argc > 1 && std::strcmp(argv[1], "--check-only") == 0;  // memcheck
  if (!time_only) {
    CheckAll<float, int64_t>();
    CheckAll<float, int32_t>();
    CheckAll<double, int64_t>();
    CheckAll<__half, int64_t>();
    CheckAll<__nv_bfloat16, int32_t>();
    std::printf("checks: %s (%d failures)\n", failures ? "FAILED" : "all passed", failures);
  }
  if (check_only) return failures ? 1 : 0;
  TimeCase<float>(65536, 100000, 1024);
  TimeCase<__nv_bfloat16>(65536, 100000, 1024);
  TimeCase<__half>(65536, 100000, 1024);
  TimeCase<float>(65536, 32000, 256);
  // Skewed ids: a frequent token's run, and token types (two rows).
  TimeCase<float>(65536, 32000, 1024, true);
  TimeCase<__nv_bfloat16>(65536, 32000, 1024, true);
  TimeCase<float>(65536, 2, 768);
  TimeCase<__nv_bfloat16>(65536, 2, 768);
  return failures ? 1 : 0;
}
