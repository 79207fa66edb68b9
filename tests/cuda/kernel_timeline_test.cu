// kernel_timeline (CUPTI's activity records of each run's kernels) and timeline_json's summary.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernel_timeline.h"
#include "cuda/gpu_test.h"

namespace qd::cuda {
namespace {

// Busy for about `cycles` clock cycles, so that each launch has a measurable span.
__global__ void timeline_spin_kernel(long long cycles, int* sink) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  if (threadIdx.x == 0 && sink) *sink = 1;
}

// Run i launches i + 1 kernels one after another on one stream: each run's list holds exactly its own, by name, in
// start order, none before the previous one's end (one stream), and the summary's times agree with them.
TEST(KernelTimeline, RecordsEachRunsKernelsInOrder) {
  SKIP_WITHOUT_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  auto runs = kernel_timeline(
      [&](int i) -> Status {
        for (int k = 0; k <= i; ++k) timeline_spin_kernel<<<1, 32, 0, s>>>(20000, nullptr);
        return cuda_status(cudaStreamSynchronize(s), "spin");
      },
      3);
  cudaStreamDestroy(s);
  // No CUPTI library, or CUPTI taken by another tool (compute-sanitizer, a profiler): nothing to record with.
  if (!runs && (runs.status().code() == StatusCode::kNotFound || runs.status().code() == StatusCode::kUnsupported)) {
    GTEST_SKIP() << runs.status().to_string();
  }
  ASSERT_TRUE(runs) << runs.status().to_string();
  ASSERT_EQ(runs->size(), 3u);
  for (size_t i = 0; i < runs->size(); ++i) {
    const auto& r = (*runs)[i];
    ASSERT_EQ(r.size(), i + 1) << "run " << i;
    for (size_t k = 0; k < r.size(); ++k) {
      EXPECT_NE(r[k].name.find("timeline_spin_kernel"), std::string::npos) << r[k].name;
      EXPECT_EQ(r[k].name.find('('), std::string::npos) << r[k].name;  // no parameter list
      EXPECT_LT(r[k].start_ns, r[k].end_ns);
      if (k > 0) EXPECT_GE(r[k].start_ns, r[k - 1].end_ns);
    }
    const nlohmann::json j = timeline_json(r);
    EXPECT_EQ(j["kernels"].size(), r.size());
    EXPECT_NEAR(j["wall_ms"].get<double>(), (r.back().end_ns - r.front().start_ns) / 1e6, 1e-9);
    EXPECT_LE(j["busy_ms"].get<double>(), j["wall_ms"].get<double>() + 1e-12);
    EXPECT_LE(j["kernel_ms"].get<double>(), j["busy_ms"].get<double>() + 1e-12);  // one stream: no overlap
  }
}

// The summary of spans that overlap and leave a gap: the busy time is their union, the kernel time their sum.
TEST(KernelTimeline, SummaryOfOverlapsAndGaps) {
  const std::vector<KernelSpan> spans = {{"a", 1000, 5000, 1}, {"b", 3000, 4000, 2}, {"c", 4500, 6000, 1},
                                         {"d", 8000, 9000, 1}};
  const nlohmann::json j = timeline_json(spans);
  EXPECT_DOUBLE_EQ(j["wall_ms"].get<double>(), 0.008);    // 1000 .. 9000 ns
  EXPECT_DOUBLE_EQ(j["busy_ms"].get<double>(), 0.006);    // 1000 .. 6000 and 8000 .. 9000
  EXPECT_DOUBLE_EQ(j["kernel_ms"].get<double>(), 0.0075);  // 4000 + 1000 + 1500 + 1000
  ASSERT_EQ(j["kernels"].size(), 4u);
  EXPECT_DOUBLE_EQ(j["kernels"][1]["start_us"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["kernels"][2]["duration_us"].get<double>(), 1.5);
  EXPECT_EQ(j["kernels"][3]["stream"], 1);
  EXPECT_DOUBLE_EQ(timeline_json({})["wall_ms"].get<double>(), 0.0);
}

}  // namespace
}  // namespace qd::cuda
