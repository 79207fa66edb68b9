// Calibration data beyond images (.npy/.npz tensors) and the --preprocess spec through the CLI, and `qdeploy run`
// with the build flags every MODEL|PLAN command takes (calib_data.h, build_flags.h, tasks/model_input.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/npy.h"
#include "core/npz.h"
#include "e2e/cli_util.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test::onnxb;
namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

Tensor wave(const Shape& s, float phase) {
  Tensor t(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.5f + 0.5f * std::sin(0.37f * static_cast<float>(i) + phase);
  return t;
}

class CalibDataCli : public test::CliTest {
 protected:
  CalibDataCli() : CliTest("calib_data_cli_") {}
  std::string npy(const std::string& name, const Tensor& t) {
    EXPECT_TRUE(write_npy(dir_ + "/" + name, t).is_ok());
    return quote(dir_ + "/" + name);
  }
  std::string npz(const std::string& name, const std::vector<NpzArray>& arrays) {
    EXPECT_TRUE(write_npz(dir_ + "/" + name, arrays).is_ok());
    return quote(dir_ + "/" + name);
  }
  std::string calibrate(const std::string& model, const std::string& data, const std::string& cache,
                        const std::string& more = "") {
    const CliResult r = cli("calibrate " + model + " --data " + data + " --cache " + quote(dir_ + "/" + cache) + " " + more);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
};

// One .npy per batch, or one .npy holding several batches of the model's fixed batch: the same scales.
TEST_F(CalibDataCli, NpyBatches) {
  const std::string model = quote(write_model(dir_, conv_relu_model()));
  const std::string a = npy("a.npy", wave({1, 3, 8, 8}, 0.f)), b = npy("b.npy", wave({1, 3, 8, 8}, 1.f));
  Tensor both(DType::kFloat32, {2, 3, 8, 8});
  std::memcpy(both.raw(), wave({1, 3, 8, 8}, 0.f).raw(), 3 * 64 * 4);
  std::memcpy(static_cast<char*>(both.raw()) + 3 * 64 * 4, wave({1, 3, 8, 8}, 1.f).raw(), 3 * 64 * 4);
  const std::string out = calibrate(model, a + "," + b, "two.cache", "--algo minmax");
  EXPECT_NE(out.find("(minmax, 2 batches)"), std::string::npos) << out;
  EXPECT_NE(calibrate(model, npy("both.npy", both), "one.cache", "--algo minmax").find("2 batches"), std::string::npos);
  EXPECT_EQ(slurp(dir_ + "/two.cache"), slurp(dir_ + "/one.cache"));
  EXPECT_NE(slurp(dir_ + "/one.cache").find("\nx: "), std::string::npos) << slurp(dir_ + "/one.cache");
  // A folder of .npy files is its files, sorted; --batches takes the first.
  fs::create_directory(dir_ + "/batches");
  npy("batches/0.npy", wave({1, 3, 8, 8}, 0.f));
  npy("batches/1.npy", wave({1, 3, 8, 8}, 1.f));
  calibrate(model, quote(dir_ + "/batches"), "dir.cache", "--algo minmax");
  EXPECT_EQ(slurp(dir_ + "/dir.cache"), slurp(dir_ + "/one.cache"));
  EXPECT_NE(calibrate(model, quote(dir_ + "/batches"), "first.cache", "--algo minmax --batches 1").find("1 batches"),
            std::string::npos);
}

// .npz maps input names to arrays (Polygraphy's data loader's form): a model with two inputs.
TEST_F(CalibDataCli, NpzInputsByName) {
  const std::string model = quote(write_model(dir_, conv_add_model()));
  const std::string z1 = npz("b1.npz", {{"x", wave({1, 3, 8, 8}, 0.f)}, {"skip", wave({1, 4, 8, 8}, 2.f)}});
  const std::string z2 = npz("b2.npz", {{"skip", wave({1, 4, 8, 8}, 3.f)}, {"x", wave({1, 3, 8, 8}, 1.f)}});
  calibrate(model, z1 + "," + z2, "c.cache");
  const std::string cache = slurp(dir_ + "/c.cache");
  for (const char* t : {"\nx: ", "\nskip: ", "\nc: ", "\ny: "}) EXPECT_NE(cache.find(t), std::string::npos) << t << cache;
  EXPECT_NE(cache.find("TRT-8600-"), std::string::npos);
  // The same data through a build's --calib and through `run`: the same cache.
  const CliResult r = cli("run " + model + " --input " + z1 + " --precision int8 --calib " + z1 + "," + z2 +
                          " --calib-cache " + quote(dir_ + "/run.cache"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(dir_ + "/run.cache"), cache);
  EXPECT_NE(r.out.find("int8"), std::string::npos) << r.out;
  // sensitivity: the same tensors as its SNR data and its calibration data.
  const CliResult sn = cli("sensitivity " + model + " --metric snr --data " + z1 + "," + z2 + " --batches 2 -q " +
                           "--save-cache " + quote(dir_ + "/sens.cache"));
  ASSERT_EQ(sn.exit_code, 0) << sn.err;
  EXPECT_NE(sn.out.find("all INT8, output y: "), std::string::npos) << sn.out;
  EXPECT_EQ(slurp(dir_ + "/sens.cache"), cache);
}

TEST_F(CalibDataCli, TensorFileErrors) {
  const std::string model = quote(write_model(dir_, conv_add_model()));
  const std::string c = " --cache " + quote(dir_ + "/c.cache");
  expect_usage_error(cli("calibrate " + model + " --data " + npy("x.npy", wave({1, 3, 8, 8}, 0.f)) + c),
                     "a .npy holds one array, but the model has 2 inputs");
  expect_usage_error(cli("calibrate " + model + " --data " + npz("m.npz", {{"x", wave({1, 3, 8, 8}, 0.f)}}) + c),
                     "no array for input 'skip'");
  expect_usage_error(cli("calibrate " + model + " --data " +
                         npz("e.npz", {{"x", wave({1, 3, 8, 8}, 0.f)}, {"skip", wave({1, 4, 8, 8}, 0.f)},
                                       {"extra", wave({1}, 0.f)}}) + c),
                     "array 'extra' is not an input of the model");
  const std::string one = quote(write_model(dir_, conv_relu_model(), "one.onnx"));
  expect_usage_error(cli("calibrate " + one + " --data " + npy("i.npy", Tensor(DType::kInt64, {1, 3, 8, 8})) + c),
                     "input 'x' is float32, the array is int64");
  expect_usage_error(cli("calibrate " + one + " --data " + npy("s.npy", wave({1, 3, 4, 4}, 0.f)) + c),
                     "input 'x' is [1x3x8x8], the array is [1x3x4x4]");
  expect_usage_error(cli("calibrate " + one + " --data " + npy("b3.npy", wave({0, 3, 8, 8}, 0.f)) + c),
                     "is not a multiple of it");
  expect_usage_error(cli("calibrate " + one + " --data " + npy("ok.npy", wave({1, 3, 8, 8}, 0.f)) + "," +
                         quote(test::source_dir() + "/models/samples") + c),
                     "mixes tensor files");
  write_bytes(dir_ + "/bad.npz", "PK\x03\x04 not really a zip archive at all");
  expect_usage_error(cli("calibrate " + one + " --data " + quote(dir_ + "/bad.npz") + c), "not a valid .npz file");
}

// run takes every build flag; a plan keeps its own and refuses the rest; --extra-output needs the reference.
TEST_F(CalibDataCli, RunTakesBuildFlags) {
  const std::string model = quote(write_model(dir_, conv_relu_model()));
  const std::string x = npy("x.npy", wave({1, 3, 8, 8}, 0.f));
  const std::string cache = quote(write_bytes(dir_ + "/c.cache", "TRT-8600-EntropyCalibration2\nx: 3c010204\nc: 3c010204\n"));
  const CliResult r = cli("run " + model + " --input x=" + x + " --precision int8 --calib-cache " + cache +
                          " --output-dir " + quote(dir_ + "/int8"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("int8"), std::string::npos) << r.out;
  ASSERT_EQ(cli("run " + model + " --input x=" + x + " --output-dir " + quote(dir_ + "/fp32")).exit_code, 0);
  auto q = read_npy(dir_ + "/int8/y.npy"), f = read_npy(dir_ + "/fp32/y.npy");
  ASSERT_TRUE(q && f);
  double worst = 0;
  for (int64_t i = 0; i < f->numel(); ++i) worst = std::max(worst, std::abs(q->get_f64(i) - f->get_f64(i)));
  EXPECT_GT(worst, 0.0);   // quantized ...
  EXPECT_LT(worst, 0.05);  // ... with scales that fit (amax 1)
  expect_usage_error(cli("run " + model + " --input x=" + x + " --precision int8 --calib-cache " + cache +
                         " --extra-output c"),
                     "--extra-output runs on the reference backend only");
  const std::string plan = quote(dir_ + "/m.plan");
  ASSERT_EQ(cli("build " + model + " -o " + plan + " --precision int8 --calib-cache " + cache).exit_code, 0);
  const CliResult p = cli("run " + plan + " --input x=" + x + " --precision int8 --output-dir " + quote(dir_ + "/plan"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(slurp(dir_ + "/plan/y.npy"), slurp(dir_ + "/int8/y.npy"));
  expect_usage_error(cli("run " + plan + " --input x=" + x + " --calib-cache " + cache), "--calib-cache cannot apply");
  expect_usage_error(cli("run " + plan + " --precision fp16"), "is a int8 plan, but --precision fp16");
  expect_usage_error(cli("run " + model + " --input " + x), "write NAME=FILE.npy, or FILE.npz");
}

// --preprocess: one spec for calibrate, sensitivity and eval; the default equals a spec that spells the default out.
TEST_F(CalibDataCli, PreprocessSpec) {
  const std::string model = quote(test::source_dir() + "/models/model_bn.onnx");
  const std::string samples = quote(test::source_dir() + "/models/samples");
  const std::string more = "--algo minmax --batch-size 2 --batches 1 ";
  calibrate(model, samples, "default.cache", more);
  calibrate(model, samples, "fit.cache", more + "--preprocess size=32,resize=fit,mean=0,std=1,order=rgb,layout=nchw");
  EXPECT_EQ(slurp(dir_ + "/default.cache"), slurp(dir_ + "/fit.cache"));
  calibrate(model, samples, "norm.cache", more + "--preprocess resize=center-crop,mean=0.5,0.5,0.5,std=0.25");
  EXPECT_NE(slurp(dir_ + "/norm.cache"), slurp(dir_ + "/default.cache"));
  const std::string c = " --cache " + quote(dir_ + "/c.cache");
  expect_usage_error(cli("calibrate " + model + " --data " + samples + c + " --preprocess resize=squash"),
                     "resize must be fit, stretch, center-crop, letterbox or none");
  expect_usage_error(cli("calibrate " + model + " --data " + samples + c + " --preprocess size=64"),
                     "disagrees with the model's input");
  expect_usage_error(cli("calibrate " + model + " --data " + samples + c + " --preprocess layout=nhwc"),
                     "[N,H,W,3]");
  expect_usage_error(cli("calibrate " + model + " --data " + samples + c + " --preprocess resize=none"),
                     "resize=none: the image is");
  // A YOLO detector's input is letterboxed.
  const std::string det = quote(test::source_dir() + "/models/yolov5n_fmnist_det.onnx");
  expect_usage_error(cli("calibrate " + det + " --data " + samples + c + " --preprocess resize=stretch"),
                     "a YOLO detector's input is letterboxed");
}

// eval and detect take the same spec: spelling out the default changes nothing, other values change the input.
TEST_F(CalibDataCli, PreprocessSpecInEvalAndDetect) {
  const std::string model = quote(test::source_dir() + "/models/model_bn.onnx");
  for (const char* d : {"tree", "tree/a", "tree/b"}) fs::create_directory(dir_ + "/" + d);
  const std::string s = test::source_dir() + "/models/samples/";
  fs::copy_file(s + "000001.jpg", dir_ + "/tree/a/1.jpg");
  fs::copy_file(s + "000002.jpg", dir_ + "/tree/a/2.jpg");
  fs::copy_file(s + "000003.jpg", dir_ + "/tree/b/3.jpg");
  const std::string eval = "eval " + model + " --classes " + quote(dir_ + "/tree") + " --json -q";
  const CliResult plain = cli(eval);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliResult spelled = cli(eval + " --preprocess size=32,resize=fit,order=rgb");
  ASSERT_EQ(spelled.exit_code, 0) << spelled.err;
  EXPECT_EQ(spelled.out, plain.out);
  expect_usage_error(cli(eval + " --preprocess size=48"), "disagrees with the model's input");
  const std::string det = quote(test::source_dir() + "/models/yolov5n_fmnist_det.onnx");
  expect_usage_error(cli("detect " + det + " " + quote(s) + " --out " + quote(dir_ + "/out") +
                         " --preprocess resize=center-crop"),
                     "a YOLO detector's input is letterboxed");
}

// Every command that calibrates, with its defaults, writes the same cache: one code path, one set of defaults.
TEST_F(CalibDataCli, SameScalesInEveryCommand) {
  const std::string model = quote(test::source_dir() + "/models/model_bn.onnx");
  const std::string samples = quote(test::source_dir() + "/models/samples");
  const std::string c = dir_ + "/";
  calibrate(model, samples, "calibrate.cache");
  ASSERT_EQ(cli("build " + model + " -o " + quote(c + "m.plan") + " --precision int8 --calib " + samples +
                " --calib-cache " + quote(c + "build.cache")).exit_code, 0);
  const CliResult s = cli("sensitivity " + model + " --metric snr --data " + samples + " --sweep int8 --layers " +
                          "/linear/Gemm -q --save-cache " + quote(c + "sensitivity.cache"));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const CliResult r = cli("run " + model + " --precision int8 --calib " + samples + " --calib-cache " +
                          quote(c + "run.cache"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CliResult cmp = cli("compare " + model + " --data " + samples + " --precision int8 --calib " + samples +
                            " --calib-cache " + quote(c + "compare.cache"));
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  const std::string want = slurp(c + "calibrate.cache");
  EXPECT_NE(want.find("TRT-8600-"), std::string::npos) << want;
  for (const char* f : {"build.cache", "sensitivity.cache", "run.cache", "compare.cache"}) {
    EXPECT_EQ(slurp(c + f), want) << f;
  }
}

// A third-party model with its own preprocessing calibrates from the command line on images: PP-OCRv4's text
// detector (dynamic H and W, BGR, ImageNet mean/std). Skipped when scripts/models/fetch-ocr-models.sh has not run.
TEST_F(CalibDataCli, PpOcrDetectorOnImages) {
  const char* cache_env = std::getenv("QD_CACHE");
  const char* home = std::getenv("HOME");
  const std::string dir = cache_env ? std::string(cache_env) + "/models"
                                    : std::string(home ? home : "") + "/.cache/qdeploy/models";
  const std::string model = dir + "/ppocrv4_det.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "no " << model << " (run scripts/models/fetch-ocr-models.sh)";
  const std::string samples = quote(test::source_dir() + "/models/samples");
  const std::string spec = "--preprocess size=96x128,resize=stretch,mean=0.485,0.456,0.406,std=0.229,0.224,0.225,order=bgr";
  const CliResult no_size = cli("calibrate " + quote(model) + " --data " + samples + " --cache " +
                                quote(dir_ + "/c.cache") + " --batches 1 --batch-size 1");
  expect_usage_error(no_size, "input size is not fixed; give it with --preprocess size=HxW");
  const std::string out = calibrate(quote(model), samples, "ocr.cache", "--batches 1 --batch-size 2 " + spec);
  EXPECT_NE(out.find("2 images"), std::string::npos) << out;
  const std::string cache = slurp(dir_ + "/ocr.cache");
  EXPECT_NE(cache.find("\nx: "), std::string::npos);
  EXPECT_NE(cache.find("sigmoid_0.tmp_0: "), std::string::npos);
}

}  // namespace
}  // namespace qd
