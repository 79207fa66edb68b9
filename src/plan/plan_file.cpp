#include "plan/plan_file.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/file_io.h"
#include "core/precision.h"
#include "plan/byte_io.h"

namespace qd {

namespace {

constexpr size_t kMagicSize = sizeof kPlanMagic;
constexpr size_t kMagicPrefix = 6;  // "QDPLAN": enough to tell a plan (maybe damaged) from an ONNX file
constexpr size_t kPrefixSize = kMagicSize + 4;  // magic + format version
constexpr size_t kChecksumSize = 8;
constexpr uint32_t kMaxSections = 4096;
constexpr uint32_t kMaxProfile = 4096;

const char* const kRebuild = "rebuild the plan with `qdeploy build`";

bool known_target(const std::string& t) { return t == "cpu" || t == "cuda"; }
bool known_precision(const std::string& p) { return static_cast<bool>(parse_precision(p)); }

Status check_profile_entry(const ShapeProfile& p) {
  auto shapes = [&] {
    return " (min " + shape_str(p.min) + ", opt " + shape_str(p.opt) + ", max " + shape_str(p.max) + ")";
  };
  if (p.min.size() != p.opt.size() || p.opt.size() != p.max.size()) {
    return invalid("shape profile of input '" + p.name + "': min, opt and max must have the same rank" + shapes());
  }
  for (size_t i = 0; i < p.min.size(); ++i) {
    const int64_t lo = p.min[i], mid = p.opt[i], hi = p.max[i];
    const bool bad = (lo >= 0 && mid >= 0 && lo > mid) || (mid >= 0 && hi >= 0 && mid > hi) ||
                     (lo >= 0 && hi >= 0 && lo > hi);
    if (bad) {
      return invalid("shape profile of input '" + p.name + "': dim " + std::to_string(i) +
                     " must satisfy min <= opt <= max" + shapes());
    }
  }
  return Status::ok();
}

Status check_header(const PlanHeader& h) {
  if (!known_target(h.target)) return invalid("unknown plan target '" + h.target + "' (cpu or cuda); " + kRebuild);
  if (!known_precision(h.precision)) {
    return invalid("unknown plan precision '" + h.precision + "' (fp32, fp16 or int8); " + kRebuild);
  }
  std::set<std::string> names;
  for (const auto& p : h.profile) {
    if (!names.insert(p.name).second) return invalid("shape profile lists input '" + p.name + "' twice");
    QD_RETURN_IF_ERROR(check_profile_entry(p));
  }
  return Status::ok();
}

void write_tensors(ByteWriter& w, const std::vector<PlanTensor>& v) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (const auto& t : v) {
    w.str(t.name);
    w.i32(static_cast<int32_t>(t.dtype));
    w.shape(t.shape);
    w.u8(t.nhwc ? 1 : 0);
    w.f32(t.scale);
  }
}

std::vector<PlanTensor> read_tensors(ByteReader& r) {
  std::vector<PlanTensor> v(r.count("tensors", 12));
  for (auto& t : v) {
    t.name = r.str("tensor name");
    const int32_t dt = r.i32();
    if (r.ok() && (dt < 0 || dt > static_cast<int32_t>(DType::kUInt64))) r.fail("unknown dtype " + std::to_string(dt));
    t.dtype = static_cast<DType>(dt);
    t.shape = r.shape("tensor shape");
    const uint8_t nhwc = r.u8();
    if (r.ok() && nhwc > 1) r.fail("bad layout flag " + std::to_string(nhwc));
    t.nhwc = nhwc == 1;
    t.scale = r.f32();
    if (r.ok() && !(t.scale >= 0.f && std::isfinite(t.scale))) r.fail("bad scale of tensor '" + t.name + "'");
  }
  return v;
}

}  // namespace

const PlanSection* PlanFile::find(const std::string& name) const {
  for (const auto& s : sections) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

uint64_t plan_checksum(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

bool has_plan_magic(const void* data, size_t size) {
  return size >= kMagicSize && std::memcmp(data, kPlanMagic, kMagicSize) == 0;
}

bool looks_like_plan(const void* data, size_t size) {
  return size >= kMagicPrefix && std::memcmp(data, kPlanMagic, kMagicPrefix) == 0;
}

Expected<std::string> encode_plan(const PlanFile& plan) {
  const PlanHeader& h = plan.header;
  if (h.format_version != kPlanFormatVersion) {
    return internal("encode_plan writes format v" + std::to_string(kPlanFormatVersion) + " only");
  }
  QD_RETURN_IF_ERROR(check_header(h));
  for (const auto& p : h.profile) {
    if (p.min.size() > kMaxPlanRank) return unsupported("input '" + p.name + "' has a rank above 8");
  }
  std::set<std::string> names;
  for (const auto& s : plan.sections) {
    if (s.name.empty() || !names.insert(s.name).second) {
      return internal("plan section names must be unique and non-empty ('" + s.name + "')");
    }
  }
  ByteWriter w;
  w.raw(kPlanMagic, kMagicSize);
  w.u32(h.format_version);
  w.str(h.qdeploy_version);
  w.str(h.target);
  w.u32(h.sm);
  w.u32(h.cuda_runtime_version);
  w.u32(h.cudnn_version);
  w.str(h.precision);
  w.u32(static_cast<uint32_t>(h.profile.size()));
  for (const auto& p : h.profile) {
    w.str(p.name);
    w.shape(p.min);
    w.shape(p.opt);
    w.shape(p.max);
  }
  w.u32(static_cast<uint32_t>(plan.sections.size()));
  for (const auto& s : plan.sections) {
    w.str(s.name);
    w.u64(s.data.size());
    w.raw(s.data.data(), s.data.size());
  }
  const uint64_t sum = plan_checksum(w.bytes().data(), w.size());
  w.u64(sum);
  return w.take();
}

Expected<PlanFile> decode_plan(const uint8_t* data, size_t size) {
  if (looks_like_plan(data, size) && !has_plan_magic(data, size)) {
    return invalid("not a qdeploy plan: it starts with \"QDPLAN\" but not with this qdeploy's plan magic (damaged, or "
                   "from an incompatible qdeploy); " + std::string(kRebuild));
  }
  if (!has_plan_magic(data, size)) {
    return invalid("not a qdeploy plan (it does not start with the plan magic); give an ONNX model, or a plan "
                   "written by `qdeploy build MODEL -o PLAN`");
  }
  if (size < kPrefixSize + kChecksumSize) return invalid("plan is corrupted or truncated (" + std::to_string(size) +
                                                         " bytes); " + kRebuild);
  ByteReader prefix(data + kMagicSize, 4, "plan");
  const uint32_t version = prefix.u32();
  if (version != kPlanFormatVersion) {
    return invalid("plan format v" + std::to_string(version) + ", this qdeploy reads v" +
                   std::to_string(kPlanFormatVersion) + ": " + kRebuild);
  }
  const size_t body = size - kChecksumSize;
  ByteReader tail(data + body, kChecksumSize, "plan");
  if (tail.u64() != plan_checksum(data, body)) {
    return invalid("plan is corrupted or truncated (checksum mismatch); copy it again or " + std::string(kRebuild));
  }

  PlanFile plan;
  PlanHeader& h = plan.header;
  h.format_version = version;
  ByteReader r(data + kPrefixSize, body - kPrefixSize, "plan header");
  h.qdeploy_version = r.str("qdeploy version");
  h.target = r.str("target");
  h.sm = r.u32();
  h.cuda_runtime_version = r.u32();
  h.cudnn_version = r.u32();
  h.precision = r.str("precision");
  const uint32_t np = r.count("shape profile entries", 16);
  if (np > kMaxProfile) r.fail("too many shape profile entries (" + std::to_string(np) + ")");
  for (uint32_t i = 0; i < np && r.ok(); ++i) {
    ShapeProfile p;
    p.name = r.str("profile input name");
    p.min = r.shape("profile min shape");
    p.opt = r.shape("profile opt shape");
    p.max = r.shape("profile max shape");
    h.profile.push_back(std::move(p));
  }
  if (!r.ok()) return r.status();
  QD_RETURN_IF_ERROR(check_header(h));

  const uint32_t ns = r.count("sections", 12);
  if (ns > kMaxSections) r.fail("too many sections (" + std::to_string(ns) + ")");
  std::set<std::string> names;
  for (uint32_t i = 0; i < ns && r.ok(); ++i) {
    PlanSection s;
    s.name = r.str("section name");
    const uint64_t n = r.u64();
    const uint8_t* p = r.raw(n, ("section '" + s.name + "'").c_str());
    if (!r.ok()) break;
    if (s.name.empty() || !names.insert(s.name).second) {
      r.fail("section name '" + s.name + "' is empty or repeated");
      break;
    }
    s.data.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    plan.sections.push_back(std::move(s));
  }
  r.expect_end();
  if (!r.ok()) return r.status();
  return plan;
}

Status write_plan(const std::string& path, const PlanFile& plan) {
  std::string bytes = QD_TRY(encode_plan(plan));
  return write_file_atomic(path, bytes);
}

Expected<PlanFile> read_plan(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.status();
  auto plan = decode_plan(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  if (!plan) return Status(plan.status()).prefix(path);
  return plan;
}

Status check_plan_target(const PlanHeader& h, int sm_of_this_gpu) {
  auto cc = [](int sm) { return "sm_" + std::to_string(sm) + " (compute capability " + std::to_string(sm / 10) + "." +
                                std::to_string(sm % 10) + ")"; };
  if (h.target != "cuda") {
    return invalid("this plan was built for the " + h.target + ", not for a GPU; build one for this GPU with "
                   "`qdeploy build MODEL -o PLAN --device cuda`");
  }
  if (static_cast<int>(h.sm) != sm_of_this_gpu) {
    return invalid("this plan was built for " + cc(static_cast<int>(h.sm)) + " but this GPU is " +
                   cc(sm_of_this_gpu) + "; plans hold kernels for one GPU architecture: rebuild it on this machine "
                   "with `qdeploy build MODEL -o PLAN --device cuda`");
  }
  return Status::ok();
}

Status check_shape_profile(const std::map<std::string, Shape>& min, const std::map<std::string, Shape>& opt,
                           const std::map<std::string, Shape>& max) {
  std::set<std::string> names;
  for (const auto* m : {&min, &opt, &max}) {
    for (const auto& kv : *m) names.insert(kv.first);
  }
  for (const auto& name : names) {
    auto a = min.find(name), b = opt.find(name), c = max.find(name);
    if (a == min.end() || b == opt.end() || c == max.end()) {
      return invalid("input '" + name + "' needs all of --min, --opt and --max (e.g. --min " + name +
                     ":1x3x320x320 --opt " + name + ":1x3x640x640 --max " + name + ":1x3x640x640)");
    }
    QD_RETURN_IF_ERROR(check_profile_entry({name, a->second, b->second, c->second}));
  }
  return Status::ok();
}

std::string encode_plan_io(const PlanIo& io) {
  ByteWriter w;
  write_tensors(w, io.inputs);
  write_tensors(w, io.outputs);
  return w.take();
}

Expected<PlanIo> decode_plan_io(const std::string& data) {
  ByteReader r(data, "plan section 'io'");
  PlanIo io;
  io.inputs = read_tensors(r);
  io.outputs = read_tensors(r);
  r.expect_end();
  if (!r.ok()) return r.status();
  return io;
}

std::string plan_tensor_line(const PlanTensor& t) {
  std::string s = t.name + "  " + dtype_name(t.dtype) + "[" + shape_str(t.shape) + "]";
  if (t.nhwc) s += "  nhwc";
  if (t.scale > 0.f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "  scale %.8g", t.scale);
    s += buf;
  }
  return s;
}

bool plan_layer_int8(const PlanLayer& l) { return l.precision == precision_name(Precision::kInt8); }

std::string encode_plan_layers(const std::vector<PlanLayer>& layers) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(layers.size()));
  for (const auto& l : layers) {
    w.str(l.name);
    w.str(l.op);
    w.i64(l.macs);
    w.str(l.precision);
  }
  return w.take();
}

Expected<std::vector<PlanLayer>> decode_plan_layers(const std::string& data) {
  ByteReader r(data, "plan section 'layers'");
  std::vector<PlanLayer> layers(r.count("layers", 20));
  for (auto& l : layers) {
    l.name = r.str("layer name");
    l.op = r.str("layer op");
    l.macs = r.i64();
    if (r.ok() && l.macs < 0) r.fail("layer '" + l.name + "' has negative MACs");
    l.precision = r.str("layer precision");
  }
  r.expect_end();
  if (!r.ok()) return r.status();
  return layers;
}

}  // namespace qd
