// qdeploy chart: a bar chart from a JSON description, or a kernel timeline; malformed input is an error that says what
// is wrong.
#include <gtest/gtest.h>

#include <string>

#include "e2e/cli_util.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test;  // e2e/cli_util.h
using test::onnxb::write_bytes;

class ChartCli : public CliTest {
 protected:
  ChartCli() : CliTest("chart_") {}
  CliResult chart(const std::string& json) {
    const std::string spec = write_bytes(dir_ + "/spec.json", json);
    return cli("chart " + quote(spec) + " -o " + quote(dir_ + "/c.svg"));
  }
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST_F(ChartCli, DrawsOneBarPerValue) {
  const auto r = chart(R"J({"title": "precision vs speed", "rows": ["fp16", "int8", "int8 + fp16 head"],
    "panels": [{"title": "mAP50-95", "values": [0.739, 0.682, 0.688], "base": 0.6, "lines": [[0.739, "FP32"]]},
               {"title": "latency (ms)", "axis_label": "batch 1", "values": [0.52, null, 0.9]}]})J");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string svg = slurp(dir_ + "/c.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"bar\""), 5u) << "six values, one of them null";
  EXPECT_NE(svg.find("int8 + fp16 head"), std::string::npos);
  EXPECT_NE(svg.find("FP32"), std::string::npos);
}

TEST_F(ChartCli, MalformedSpecs) {
  expect_usage_error(chart("{"), "not valid JSON");
  expect_usage_error(chart(R"({"rows": []})"), "rows");
  expect_usage_error(chart(R"({"rows": ["a"], "panels": [{"values": [1, 2]}]})"), "one number (or null) per row");
  expect_usage_error(chart(R"({"rows": ["a"], "panels": [{"values": ["x"]}]})"), "numbers or null");
  expect_usage_error(chart(R"({"rows": ["a"], "panels": [{"values": [1], "lines": [[1]]}]})"), "[value, legend]");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/c.svg")) << "nothing written for a bad spec";
  expect_usage_error(cli("chart " + quote(dir_ + "/missing.json") + " -o " + quote(dir_ + "/c.svg")), "missing.json");
}

// What `qdeploy bench --export-timeline` writes, drawn as a timeline: the last run of the batch asked for (default the
// first), a row per stream, kernels coloured by family; malformed timelines and absent batches are errors.
TEST_F(ChartCli, DrawsATimeline) {
  const std::string timeline = write_bytes(dir_ + "/t.json", R"J([
    {"batch": 32, "runs": [{"kernels": [{"name": "x", "start_us": 0, "duration_us": 1, "stream": 1}]},
                          {"kernels": [{"name": "qd::cuda::conv_igemm_kernel<128, 64>", "start_us": 0,
                                        "duration_us": 20.5, "stream": 13},
                                       {"name": "qd::cuda::slice_concat_tiled_kernel<unsigned int>", "start_us": 10,
                                        "duration_us": 5, "stream": 14},
                                       {"name": "qd::cuda::conv_igemm_kernel<64, 64>", "start_us": 21,
                                        "duration_us": 8, "stream": 13}]}]},
    {"batch": 1, "runs": [{"kernels": [{"name": "k", "start_us": 0, "duration_us": 2, "stream": 3}]}]}])J");
  const std::string out = dir_ + "/t.svg";
  CliResult r = cli("chart " + quote(timeline) + " -o " + quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 kernels on 2 streams"), std::string::npos) << r.out;
  std::string svg = slurp(out);
  EXPECT_EQ(count(svg, "class=\"span\""), 3u);
  EXPECT_NE(svg.find(">conv_igemm_kernel<"), std::string::npos);  // the legend's families
  EXPECT_NE(svg.find(">slice_concat_tiled_kernel<"), std::string::npos);
  EXPECT_NE(svg.find(">stream 14<"), std::string::npos);
  r = cli("chart " + quote(timeline) + " -o " + quote(out) + " --batch 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(slurp(out), "class=\"span\""), 1u);
  expect_usage_error(cli("chart " + quote(timeline) + " -o " + quote(out) + " --batch 8"), "no timeline at batch 8");
  expect_usage_error(cli("chart " + quote(write_bytes(dir_ + "/b.json", R"([{"batch": 1, "runs": []}])")) + " -o " +
                         quote(out)),
                     "non-empty array");
  expect_usage_error(
      cli("chart " +
          quote(write_bytes(dir_ + "/k.json", R"([{"batch": 1, "runs": [{"kernels": [{"name": "k"}]}]}])")) +
          " -o " + quote(out)),
      "\"start_us\"");
  const std::string spec = write_bytes(dir_ + "/spec.json", R"({"rows": ["a"], "panels": [{"values": [1]}]})");
  expect_usage_error(cli("chart " + quote(spec) + " -o " + quote(out) + " --batch 2"), "--batch is for timelines");
}

}  // namespace
}  // namespace qd
