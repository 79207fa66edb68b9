// Conversions between the public API's types (include/qdeploy/) and the library's own: statuses, tensors, tensor
// descriptions and build options. The public face (src/api/), the contexts that implement qdeploy::ExecutionContext
// and the CLI use them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "qdeploy/engine.h"
#include "runtime/engine.h"

namespace qd {

qdeploy::Status to_public(const Status& s);
Status from_public(const qdeploy::Status& s);
template <typename T>
qdeploy::Expected<T> to_public(Expected<T>&& e) {
  if (!e) return to_public(e.status());
  return std::move(e).value();
}

template <typename T>
Expected<T> from_public(qdeploy::Expected<T>&& e) {
  if (!e) return from_public(e.status());
  return std::move(e).value();
}

qdeploy::HostTensor to_public(const Tensor& t);
Expected<Tensor> from_public(const qdeploy::HostTensor& t);
Expected<std::map<std::string, Tensor>> from_public(const std::map<std::string, qdeploy::HostTensor>& ts);
qdeploy::TensorInfo to_public(const TensorDesc& d);

// The typed options as the library's (device, precision, modes and formats as their words) and back.
BuildOptions from_public(const qdeploy::BuildOptions& o);
Expected<qdeploy::BuildOptions> to_public(const BuildOptions& o);

}  // namespace qd

// In a function returning qdeploy::Status or qdeploy::Expected: returns a failed qd::Status as the public one.
#define QD_API_CHECK(expr)                                  \
  do {                                                      \
    const ::qd::Status qd_api_st_ = (expr);                 \
    if (!qd_api_st_.is_ok()) return ::qd::to_public(qd_api_st_); \
  } while (0)
