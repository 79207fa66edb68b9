// The front end: where an ONNX model enters. It imports the model (the only place above the importer that needs
// protobuf) and hands the ir::Graph to a backend from the table of backends this build has (runtime/backend.h). It is
// the top library (qdeploy_frontend): the runtime and the backends below it never include the importer, so a plan
// loads and runs without it. build_engine and load_engine (runtime/engine.h) are defined here too.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"
#include "runtime/engine.h"

namespace qd {

// Imports `path` and prepares it (passes/prepare_graph) with the given input shapes.
Expected<Graph> load_prepared(const std::string& path, const std::map<std::string, Shape>& shapes);

// load_engine (runtime/engine.h) with the GPU plan run on device `device_index` instead of the one it was built on
// (a plan runs on any GPU of the model it was built for: one engine per GPU of a server).
Expected<std::unique_ptr<Engine>> load_engine_on_device(const std::string& plan_path, int device_index);

}  // namespace qd
