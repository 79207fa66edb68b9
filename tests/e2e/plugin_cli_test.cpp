// Plugins on the command line: a DCNv4 model runs with the built-in plugin and with libqd_dcnv4.so loaded through
// --plugin (the same numbers), as a model and as a plan; a plan whose plugins are missing, a library that is no
// plugin and a bad attribute are exit-2 errors that say what to do.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "core/npy.h"
#include "onnx/importer.h"
#include "plan/plan_file.h"
#include "plugins/dcnv4_model.h"
#include "plugins/plugin_cases.h"
#include "qdeploy/plugin.h"

namespace qd::test {
namespace {

class PluginCli : public CliTest {
 protected:
  PluginCli() : CliTest("plugin_cli_") {}
  void write_model(const onnx::ModelProto& m) {
    ASSERT_TRUE(write_file_atomic(model(), m.SerializeAsString()).is_ok());
    value_ = random_f32({2, 5, 6, 64}, 1);
    om_ = random_f32({2, 5, 6, 112}, 2, -3.f, 3.f);
    ASSERT_TRUE(write_npy(dir_ + "/v.npy", value_).is_ok());
    ASSERT_TRUE(write_npy(dir_ + "/o.npy", om_).is_ok());
  }
  std::string model() const { return dir_ + "/dcn.onnx"; }
  std::string inputs() const {
    return " --input value=" + quote(dir_ + "/v.npy") + " --input offset_mask=" + quote(dir_ + "/o.npy");
  }
  // Runs `what` (model or plan) with extra flags; returns y.
  Tensor run(const std::string& what, const std::string& flags, const std::string& out) {
    const CliResult r = run_cli(dir_, "run " + quote(what) + inputs() + " --output-dir " + quote(dir_ + "/" + out) + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto y = read_npy(dir_ + "/" + out + "/y.npy");
    EXPECT_TRUE(y) << y.status().to_string();
    return y ? *y : Tensor();
  }
  Tensor value_, om_;
};

TEST_F(PluginCli, BuiltInAndLibraryGiveTheReference) {
  write_model(dcnv4_model(2, 5, 6, 4, 16, 112));
  qdeploy::register_builtin_plugins();
  auto g = import_onnx_file(model());
  ASSERT_TRUE(g) << g.status().to_string();
  auto expected = run_plugin_case(*g, {value_, om_});
  ASSERT_TRUE(expected) << expected.status().to_string();

  const Tensor builtin = run(model(), "", "builtin");
  EXPECT_EQ(max_abs_diff(builtin, (*expected)[0]), 0.0);
  const std::string lib = QD_DCNV4_PLUGIN_PATH;
  const Tensor loaded = run(model(), " --plugin " + quote(lib), "lib");
  EXPECT_EQ(max_abs_diff(loaded, (*expected)[0]), 0.0);

  // The library's op replaced the built-in one (the listing names where each op came from).
  const CliResult ops = run_cli(dir_, "ops --plugin " + quote(lib));
  ASSERT_EQ(ops.exit_code, 0) << ops.err;
  EXPECT_NE(ops.out.find("ai.qdeploy::DCNv4@1 (" + std::filesystem::canonical(lib).string() + ")"), std::string::npos)
      << ops.out;
  const CliResult plain = run_cli(dir_, "ops");
  EXPECT_NE(plain.out.find("ai.qdeploy::DCNv4@1 (built in)"), std::string::npos) << plain.out;
}

TEST_F(PluginCli, PlansKeepPluginNodesAndRefuseMissingPlugins) {
  write_model(dcnv4_model(2, 5, 6, 4, 16, 112));
  const std::string plan = dir_ + "/dcn.plan";
  const CliResult b = run_cli(dir_, "build " + quote(model()) + " -o " + quote(plan) + " --device cpu");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const Tensor from_model = run(model(), "", "model");
  const Tensor from_plan = run(plan, "", "plan");
  EXPECT_EQ(max_abs_diff(from_model, from_plan), 0.0);

  auto pf = read_plan(plan);
  ASSERT_TRUE(pf) << pf.status().to_string();
  for (auto& s : pf->sections) {
    if (s.name == "plugins") s.data += "ai.example::Warp@3\t/opt/libwarp.so\n";
  }
  const std::string needs = dir_ + "/needs.plan";
  ASSERT_TRUE(write_plan(needs, *pf).is_ok());
  const CliResult r = run_cli(dir_, "run " + quote(needs) + inputs());
  expect_usage_error(r, "the plan uses plugin ops that are not registered:\n  ai.example::Warp@3 (the plan was "
                        "built with --plugin /opt/libwarp.so)");
}

TEST_F(PluginCli, BadLibrariesAndAttributesAreUsageErrors) {
  write_model(dcnv4_model(2, 5, 6, 4, 16, 112, {{"remove_center", 2}}));
  expect_usage_error(run_cli(dir_, "run " + quote(model()) + inputs()),
                     "node 'dcn' (ai.qdeploy::DCNv4@1, plugin built in): ");
  expect_usage_error(run_cli(dir_, "run " + quote(model()) + inputs()),
                     "attribute 'remove_center' = 2 is outside the allowed range [0, 1]");
  expect_usage_error(run_cli(dir_, "ops --plugin " + quote(dir_ + "/missing.so")), "no such file");
  expect_usage_error(run_cli(dir_, "ops --plugin " + quote(model())), "cannot load it");
}

}  // namespace
}  // namespace qd::test
