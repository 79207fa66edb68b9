// Untrusted-input robustness of the NN / reduction / normalization / quantization ops: random shapes, element
// types, arities and attribute values (negative, zero, huge, NaN) must give a result or a Status, never a crash,
// hang or undefined behaviour (run this under the sanitizer build to check the latter).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "nn_test_util.h"

namespace qd {
namespace {

struct OpCase {
  const char* name;
  std::vector<const char*> int_attrs, ints_attrs, float_attrs;
};

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> c = {
      {"MaxPool", {"ceil_mode", "storage_order"}, {"kernel_shape", "strides", "pads", "dilations"}, {}},
      {"AveragePool", {"ceil_mode", "count_include_pad"}, {"kernel_shape", "strides", "pads"}, {}},
      {"LpPool", {"p", "ceil_mode"}, {"kernel_shape", "strides", "pads"}, {}},
      {"GlobalAveragePool", {}, {}, {}},
      {"GlobalMaxPool", {}, {}, {}},
      {"GlobalLpPool", {"p"}, {}, {}},
      {"BatchNormalization", {"training_mode", "spatial"}, {}, {"epsilon", "momentum"}},
      {"InstanceNormalization", {}, {}, {"epsilon"}},
      {"LayerNormalization", {"axis", "stash_type"}, {}, {"epsilon"}},
      {"MeanVarianceNormalization", {}, {"axes"}, {}},
      {"LRN", {"size"}, {}, {"alpha", "beta", "bias"}},
      {"Softmax", {"axis"}, {}, {}},
      {"LogSoftmax", {"axis"}, {}, {}},
      {"Hardmax", {"axis"}, {}, {}},
      {"ReduceSum", {"keepdims", "noop_with_empty_axes"}, {"axes"}, {}},
      {"ReduceMean", {"keepdims"}, {"axes"}, {}},
      {"ReduceMax", {"keepdims"}, {"axes"}, {}},
      {"ReduceMin", {"keepdims"}, {"axes"}, {}},
      {"ReduceProd", {"keepdims"}, {"axes"}, {}},
      {"ReduceL1", {"keepdims"}, {"axes"}, {}},
      {"ReduceL2", {"keepdims"}, {"axes"}, {}},
      {"ReduceLogSum", {"keepdims"}, {"axes"}, {}},
      {"ReduceLogSumExp", {"keepdims"}, {"axes"}, {}},
      {"ReduceSumSquare", {"keepdims"}, {"axes"}, {}},
      {"QuantizeLinear", {"axis"}, {}, {}},
      {"DequantizeLinear", {"axis"}, {}, {}},
      {"DynamicQuantizeLinear", {}, {}, {}},
      {"Einsum", {}, {}, {}},
  };
  return c;
}

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}
  int64_t small_int() {
    static const int64_t v[] = {-3, -2, -1, 0, 0, 1, 1, 1, 2, 2, 3, 4, 7, int64_t{1} << 20, int64_t{1} << 40, INT64_MIN};
    return v[pick(sizeof v / sizeof v[0])];
  }
  float any_float() {
    static const float v[] = {0.f, 1e-5f, 1.f, 0.5f, -1.f, 1e30f, NAN, INFINITY, -INFINITY, 2.f};
    return v[pick(sizeof v / sizeof v[0])];
  }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  Shape shape(size_t max_rank = 5) {
    Shape s(pick(max_rank + 1));
    for (auto& d : s) d = static_cast<int64_t>(pick(5));
    return s;
  }
  Tensor tensor() {
    static const DType types[] = {DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kInt8, DType::kUInt8,
                                  DType::kInt64, DType::kFloat64, DType::kBool, DType::kInt32};
    const DType t = types[pick(sizeof types / sizeof types[0])];
    Tensor x(t, shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (t == DType::kBool) x.data<uint8_t>()[i] = static_cast<uint8_t>(pick(2));
      else x.set_f64(i, pick(4) == 0 ? static_cast<double>(small_int() % 300) : std::uniform_real_distribution<double>(-3, 3)(rng_));
    }
    return x;
  }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

// QD_ROBUSTNESS_SEED and QD_ROBUSTNESS_ITERS widen the search (e.g. under the sanitizer build).
int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : def;
}

TEST(NnOpsRobustness, RandomInputsAndAttributesNeverCrash) {
  Gen gen(static_cast<uint32_t>(env_int("QD_ROBUSTNESS_SEED", 12345)));
  const int iters = env_int("QD_ROBUSTNESS_ITERS", 300);
  const char* equations[] = {"ij,jk->ik", "...ii->...i", "i,i", "ij->ji", "bij,bjk->bik", "...", "a..b", "ii", "->", ""};
  int ok = 0, errors = 0;
  for (const OpCase& oc : cases()) {
    const auto op = op_from_name(oc.name);
    ASSERT_TRUE(op) << oc.name;
    const OpSchema& schema = op_schema(*op);
    for (int iter = 0; iter < iters; ++iter) {
      AttrMap a;
      for (const char* n : oc.int_attrs) {
        if (gen.pick(2)) a.set(n, gen.small_int());
      }
      for (const char* n : oc.ints_attrs) {
        if (gen.pick(4) == 0) continue;
        std::vector<int64_t> v(gen.pick(5));
        for (auto& e : v) e = gen.small_int() % 5;
        if (gen.pick(8) == 0 && !v.empty()) v[0] = gen.small_int();
        a.set(n, v);
      }
      for (const char* n : oc.float_attrs) {
        if (gen.pick(2)) a.set(n, gen.any_float());
      }
      if (std::string(oc.name) == "Einsum" && gen.pick(8)) a.set("equation", std::string(equations[gen.pick(10)]));
      if (gen.pick(10) == 0) a.set("axis", std::string("not an int"));  // wrong attribute type
      const int max_in = schema.max_inputs < 0 ? 4 : schema.max_inputs;
      const int nin = schema.min_inputs + static_cast<int>(gen.pick(static_cast<size_t>(max_in - schema.min_inputs + 1)));
      std::vector<Tensor> ins;
      const Tensor base = gen.tensor();
      for (int i = 0; i < nin; ++i) {
        // Mostly related inputs (the same tensor, its channel count, scalars), sometimes random ones.
        const size_t kind = gen.pick(5);
        if (i == 0 || kind == 0) ins.push_back(i == 0 ? base : gen.tensor());
        else if (kind == 1 && base.rank() >= 2) ins.push_back(Tensor(base.dtype(), {base.shape()[1]}));
        else if (kind == 2) ins.push_back(Tensor(base.dtype(), {}));
        else if (kind == 3) ins.push_back(Tensor::from_i64({static_cast<int64_t>(gen.pick(5)) - 2}));
        else ins.push_back(Tensor());  // omitted optional input
      }
      const int nout = schema.min_outputs + static_cast<int>(gen.pick(static_cast<size_t>(schema.max_outputs - schema.min_outputs + 1)));
      for (int opset : {11, 13, 17}) {
        auto r = test::run_op(*op, a, ins, nout, opset);
        if (r) ++ok;
        else ++errors;
        if (!r) {
          EXPECT_FALSE(r.status().message().empty()) << oc.name;
          EXPECT_NE(r.status().code(), StatusCode::kInternal) << oc.name << ": " << r.status().to_string();
        }
      }
    }
  }
  // Both paths must be exercised for the test to mean anything.
  EXPECT_GT(ok, iters * 2);
  EXPECT_GT(errors, iters * 2);
}

}  // namespace
}  // namespace qd

namespace qd {
namespace {

// An empty tensor can still have one huge dim; kernels must not size scratch buffers from that dim.
TEST(NnOpsRobustness, EmptyTensorsWithHugeDims) {
  const int64_t huge = int64_t{1} << 36;
  AttrMap pool;
  pool.set("kernel_shape", std::vector<int64_t>{2});
  auto r = test::run_op(OpType::MaxPool, pool, {Tensor(DType::kFloat32, {0, 1, huge})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{0, 1, huge - 1}));
  r = test::run_op(OpType::AveragePool, pool, {Tensor(DType::kFloat32, {1, 0, huge})});
  ASSERT_TRUE(r) << r.status().to_string();
  AttrMap axis;
  axis.set("axis", int64_t{1});
  r = test::run_op(OpType::Softmax, axis, {Tensor(DType::kFloat32, {0, huge})});
  ASSERT_TRUE(r) << r.status().to_string();
  AttrMap axes;
  axes.set("axes", std::vector<int64_t>{0});
  r = test::run_op(OpType::MeanVarianceNormalization, axes, {Tensor(DType::kFloat32, {0, huge})});
  ASSERT_TRUE(r) << r.status().to_string();
  r = test::run_op(OpType::LayerNormalization, {}, {Tensor(DType::kFloat32, {huge, 0}), Tensor(DType::kFloat32, {0})});
  ASSERT_TRUE(r) << r.status().to_string();
  // Dims whose product overflows int64 behind a leading 0 (a valid empty shape).
  const Shape wide = {0, int64_t{1} << 40, int64_t{1} << 40};
  AttrMap size;
  size.set("size", int64_t{3});
  r = test::run_op(OpType::LRN, size, {Tensor(DType::kFloat32, wide)});
  ASSERT_TRUE(r) << r.status().to_string();
  const Shape mid0 = {int64_t{1} << 40, 0, int64_t{1} << 40};
  r = test::run_op(OpType::InstanceNormalization, {},
                   {Tensor(DType::kFloat32, mid0), Tensor(DType::kFloat32, {0}), Tensor(DType::kFloat32, {0})});
  ASSERT_TRUE(r) << r.status().to_string();
  r = test::run_op(OpType::Softmax, {}, {Tensor(DType::kFloat32, wide)});
  ASSERT_TRUE(r) << r.status().to_string();
  AttrMap a1;
  a1.set("axis", int64_t{1});
  r = test::run_op(OpType::QuantizeLinear, a1, {Tensor(DType::kFloat32, mid0), Tensor(DType::kFloat32, {0})});
  ASSERT_TRUE(r) << r.status().to_string();
  r = test::run_op(OpType::ReduceMax, {}, {Tensor(DType::kFloat32, {3, 0})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].get_f64(0), -std::numeric_limits<double>::infinity());
  AttrMap eq;
  eq.set("equation", std::string("ij,jk->ik"));
  r = test::run_op(OpType::Einsum, eq, {Tensor(DType::kFloat32, {2, 0}), Tensor(DType::kFloat32, {0, 3})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(test::values((*r)[0]), std::vector<double>(6, 0.0));
}

}  // namespace
}  // namespace qd
