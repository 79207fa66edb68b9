// qdeploy chart: a bar chart from a JSON description; malformed descriptions are errors that say what is wrong.
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

}  // namespace
}  // namespace qd
