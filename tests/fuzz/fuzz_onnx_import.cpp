// libFuzzer target: ONNX bytes -> import -> prepare -> (small graphs) reference run. See onnx_harness.h.
//
// Byte-level mutation of a protobuf mostly breaks its framing, so the importer's parser rejects it and the passes and
// ops behind it are rarely reached. A custom mutator therefore also edits the parsed ModelProto through protobuf
// reflection: it picks one field anywhere in the model and sets it to a value chosen to hit edge cases (0, -1, huge,
// another op's name, another value's name, a duplicated or deleted node/attribute/dim), then serializes it again.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "onnx_full.pb.h"
#include "onnx_harness.h"
#include "ops/op_type.h"

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// One mutable spot: a field of a message (and an element index for repeated fields, -1 otherwise).
struct Spot {
  Message* msg;
  const FieldDescriptor* field;
  int index;
};

void collect(Message* m, std::vector<Spot>* spots, std::vector<std::string>* names, int depth) {
  if (depth > 8) return;
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  // Unset fields of this message can be set too (e.g. a missing attribute value).
  const auto* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!f->is_repeated() && !r->HasField(*m, f) && f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      spots->push_back({m, f, -1});
    }
  }
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) {
      const int n = r->FieldSize(*m, f);
      spots->push_back({m, f, n});  // "append / delete" spot for the list itself
      for (int i = 0; i < n; ++i) {
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          collect(r->MutableRepeatedMessage(m, f, i), spots, names, depth + 1);
        } else {
          spots->push_back({m, f, i});
          if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING && f->type() == FieldDescriptor::TYPE_STRING) {
            names->push_back(r->GetRepeatedString(*m, f, i));
          }
        }
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      collect(r->MutableMessage(m, f), spots, names, depth + 1);
    } else {
      spots->push_back({m, f, -1});
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING && f->name() == "name") names->push_back(r->GetString(*m, f));
    }
  }
}

int64_t interesting_int(std::mt19937_64& rng, int64_t old) {
  static const int64_t kValues[] = {0, 1, -1, 2, 3, 4, 7, 8, 13, 17, 64, 255, 256, 1 << 16, int64_t{1} << 20,
                                    int64_t{1} << 31, int64_t{1} << 32, int64_t{1} << 40, int64_t{1} << 62,
                                    INT64_MAX, INT64_MIN, -2, -4, INT32_MAX, INT32_MIN};
  switch (rng() % 4) {
    case 0: return kValues[rng() % (sizeof kValues / sizeof kValues[0])];
    case 1: return static_cast<int64_t>(static_cast<uint64_t>(old) + rng() % 5 - 2);  // wraps, no UB
    case 2: return static_cast<int64_t>(0 - static_cast<uint64_t>(old));
    default: return static_cast<int64_t>(rng() % 32);
  }
}

std::string interesting_string(std::mt19937_64& rng, const FieldDescriptor* f, const std::vector<std::string>& names) {
  if (f->name() == "op_type") {
    if (rng() % 8 == 0) return "NotAnOp";
    return qd::op_name(static_cast<qd::OpType>(rng() % static_cast<int>(qd::OpType::kCount)));
  }
  if (f->name() == "domain") return rng() % 2 ? "" : "com.example";
  if (!names.empty() && rng() % 4 != 0) return names[rng() % names.size()];
  static const char* kWords[] = {"", "x", "y", "NOTSET", "SAME_UPPER", "VALID", "nearest", "linear", "constant",
                                 "reflect", "edge", "DCR", "CRD", "half_pixel", "asymmetric", ".."};
  return kWords[rng() % (sizeof kWords / sizeof kWords[0])];
}

// One structural edit of a parsed model; false when the model has nothing to edit.
bool mutate_model(qd_fuzz_onnx::ModelProto* model, std::mt19937_64& rng) {
  std::vector<Spot> spots;
  std::vector<std::string> names;
  collect(model, &spots, &names, 0);
  if (spots.empty()) return false;
  const Spot s = spots[rng() % spots.size()];
  const Reflection* r = s.msg->GetReflection();
  const FieldDescriptor* f = s.field;
  if (f->is_repeated() && s.index == r->FieldSize(*s.msg, f)) {
    const int n = r->FieldSize(*s.msg, f);
    if (n > 0 && rng() % 2) {  // delete one element (swap it to the end first)
      r->SwapElements(s.msg, f, static_cast<int>(rng() % n), n - 1);
      r->RemoveLast(s.msg, f);
      return true;
    }
    if (n >= 64) return false;
    switch (f->cpp_type()) {  // append: a copy of an element, or a fresh value
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (n > 0) r->AddMessage(s.msg, f)->CopyFrom(r->GetRepeatedMessage(*s.msg, f, static_cast<int>(rng() % n)));
        else r->AddMessage(s.msg, f);
        return true;
      case FieldDescriptor::CPPTYPE_INT64: r->AddInt64(s.msg, f, interesting_int(rng, 1)); return true;
      case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(s.msg, f, static_cast<int32_t>(interesting_int(rng, 1))); return true;
      case FieldDescriptor::CPPTYPE_UINT64: r->AddUInt64(s.msg, f, static_cast<uint64_t>(interesting_int(rng, 1))); return true;
      case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(s.msg, f, static_cast<float>(interesting_int(rng, 1))); return true;
      case FieldDescriptor::CPPTYPE_DOUBLE: r->AddDouble(s.msg, f, static_cast<double>(interesting_int(rng, 1))); return true;
      case FieldDescriptor::CPPTYPE_STRING: r->AddString(s.msg, f, interesting_string(rng, f, names)); return true;
      default: return false;
    }
  }
  const bool rep = f->is_repeated();
  const int i = s.index;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v = interesting_int(rng, rep ? r->GetRepeatedInt64(*s.msg, f, i) : r->GetInt64(*s.msg, f));
      rep ? r->SetRepeatedInt64(s.msg, f, i, v) : r->SetInt64(s.msg, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      const int32_t v = static_cast<int32_t>(interesting_int(rng, rep ? r->GetRepeatedInt32(*s.msg, f, i) : r->GetInt32(*s.msg, f)));
      rep ? r->SetRepeatedInt32(s.msg, f, i, v) : r->SetInt32(s.msg, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const uint64_t v = static_cast<uint64_t>(interesting_int(rng, 0));
      rep ? r->SetRepeatedUInt64(s.msg, f, i, v) : r->SetUInt64(s.msg, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      static const float kF[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-30f, 1e30f, INFINITY, -INFINITY, NAN};
      const float v = kF[rng() % (sizeof kF / sizeof kF[0])];
      rep ? r->SetRepeatedFloat(s.msg, f, i, v) : r->SetFloat(s.msg, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double v = rng() % 2 ? NAN : static_cast<double>(interesting_int(rng, 0));
      rep ? r->SetRepeatedDouble(s.msg, f, i, v) : r->SetDouble(s.msg, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = f->enum_type();
      const int v = e->value(static_cast<int>(rng() % e->value_count()))->number();
      rep ? r->SetRepeatedEnumValue(s.msg, f, i, v) : r->SetEnumValue(s.msg, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (!rep) r->SetBool(s.msg, f, !r->GetBool(*s.msg, f));
      return !rep;
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v;
      if (f->type() == FieldDescriptor::TYPE_BYTES) {  // raw_data: grow, shrink or flip a byte
        v = rep ? r->GetRepeatedString(*s.msg, f, i) : r->GetString(*s.msg, f);
        const int what = static_cast<int>(rng() % 3);
        if (what == 0 || v.empty()) v.resize(static_cast<size_t>(rng() % 64) * (rng() % 2 ? 1 : 8));
        else if (what == 1) v.resize(v.size() / 2);
        else v[rng() % v.size()] = static_cast<char>(rng());
      } else {
        v = interesting_string(rng, f, names);
      }
      rep ? r->SetRepeatedString(s.msg, f, i, v) : r->SetString(s.msg, f, v);
      return true;
    }
    default: return false;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (rng() % 4 != 0) {
    qd_fuzz_onnx::ModelProto model;
    if (model.ParseFromArray(data, static_cast<int>(size))) {
      const int edits = 1 + static_cast<int>(rng() % 3);
      bool changed = false;
      for (int e = 0; e < edits; ++e) changed |= mutate_model(&model, rng);
      std::string out;
      if (changed && model.SerializeToString(&out) && out.size() <= max_size) {
        std::memcpy(data, out.data(), out.size());
        return out.size();
      }
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const qd::Status st = qd::fuzz::onnx_one_input(std::string(reinterpret_cast<const char*>(data), size));
  // A user's bad model must never produce an internal error: treat it as a crash so that libFuzzer keeps the input.
  if (st.code() == qd::StatusCode::kInternal && !std::getenv("QD_FUZZ_ALLOW_INTERNAL")) {
    std::fprintf(stderr, "internal error from a model: %s\n", st.to_string().c_str());
    std::abort();
  }
  return 0;
}
