// qdeploy's public C++ API: #include "qdeploy/qdeploy.h", link qdeploy::qdeploy (CMake: find_package(qdeploy)) or
// `pkg-config --cflags --libs qdeploy`. docs/cpp-api.md is the guide.
#pragma once

#include "qdeploy/detector.h"
#include "qdeploy/device.h"
#include "qdeploy/engine.h"
#include "qdeploy/kernel_policy.h"
#include "qdeploy/plugin.h"
#include "qdeploy/quantize.h"
#include "qdeploy/status.h"
#include "qdeploy/tensor.h"
