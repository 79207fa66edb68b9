// The plugin-attribute fuzz harness, shared by the libFuzzer target and the unit test that replays
// tests/fuzz/corpus/plugin_attrs/*: bytes -> a plugin op, an attribute map of any names, kinds and values, and input
// shapes -> the schema check (resolve_plugin_attrs) -> the op's shape inference -> its reference when small. Every
// error is fine; a crash, a sanitizer report, a hang or a kInternal status (returned, for the caller to check) is a
// bug. Input layout: u8 op index, u8 attribute count, per attribute [u8 name (a declared name when below their
// count, else u8 length + bytes), u8 kind, payload], then per input u8 rank + rank x u8 dims.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/plugin_registry.h"

namespace qd::fuzz {

constexpr int64_t kPluginMaxRunElements = 1 << 16;

class Bytes {
 public:
  explicit Bytes(const std::string& s) : s_(s) {}
  bool more() const { return pos_ < s_.size(); }
  uint8_t u8() { return pos_ < s_.size() ? static_cast<uint8_t>(s_[pos_++]) : 0; }
  template <typename T>
  T pod() {
    T v{};
    if (pos_ + sizeof(T) <= s_.size()) std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const size_t n = u8();
    std::string r = pos_ < s_.size() ? s_.substr(pos_, n) : "";
    pos_ += n;
    return r;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

inline Status plugin_attrs_one_input(const std::string& bytes, bool* ran = nullptr) {
  if (ran) *ran = false;
  const auto ops = plugin_ops();
  if (ops.empty()) return Status::ok();
  Bytes b(bytes);
  const PluginOp& p = *ops[b.u8() % ops.size()];
  AttrMap attrs;
  const int count = b.u8() % 16;
  for (int i = 0; i < count && b.more(); ++i) {
    const uint8_t sel = b.u8();
    const std::string name = sel < p.def.attrs.size() ? p.def.attrs[sel].name : b.str();
    switch (b.u8() % 5) {
      case 0: attrs.set(name, b.pod<int64_t>()); break;
      case 1: attrs.set(name, b.pod<float>()); break;
      case 2: attrs.set(name, b.str()); break;
      case 3: {
        std::vector<int64_t> v(b.u8() % 8);
        for (auto& x : v) x = b.pod<int64_t>();
        attrs.set(name, v);
        break;
      }
      default: {
        std::vector<float> v(b.u8() % 8);
        for (auto& x : v) x = b.pod<float>();
        attrs.set(name, v);
      }
    }
  }
  auto resolved = resolve_plugin_attrs(p.def, attrs);
  if (!resolved) return resolved.status();
  Node n;
  n.name = "fuzz";
  n.op = p.id;
  n.attrs = to_attr_map(*resolved);
  std::vector<DType> types;
  std::vector<Shape> shapes;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < p.def.inputs.size(); ++i) {
    Shape s(b.u8() % 6);
    int64_t elements = 1;
    for (auto& d : s) {
      d = b.u8() % 40;
      elements *= d;
    }
    if (elements > kPluginMaxRunElements) return Status::ok();
    n.inputs.push_back(static_cast<int>(i));
    types.push_back(from_plugin_dtype(p.def.inputs[i].dtypes[0]));
    shapes.push_back(s);
    auto t = Tensor::make(types.back(), s);
    if (!t) return t.status();
    inputs.push_back(std::move(*t));
  }
  for (size_t i = 0; i < p.def.outputs.size(); ++i) n.outputs.push_back(static_cast<int>(p.def.inputs.size() + i));
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  InferCtx ctx(n, types, shapes, ptrs);
  QD_RETURN_IF_ERROR(infer_node(ctx));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    int64_t elements = 1;
    for (int64_t d : ctx.out_shape(i)) elements *= d;
    if (elements > kPluginMaxRunElements) return Status::ok();
  }
  auto out = run_node(ctx, ptrs);
  if (ran) *ran = true;
  return out ? Status::ok() : out.status();
}

}  // namespace qd::fuzz
