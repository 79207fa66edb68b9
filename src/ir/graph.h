// The intermediate representation: values (tensors flowing between nodes), nodes (one ONNX-spelled op each),
// constants (initializers and folded values). Nodes are kept in topological order.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/attr.h"
#include "ops/op_type.h"

namespace qd {

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;               // -1 for unknown dims; meaningful only when has_shape
  bool has_shape = false;
  std::vector<std::string> dim_names;  // graph inputs only: symbolic dim names ("" where fixed)
  int producer = -1;         // node index; -1 for graph inputs and constants
};

struct Node {
  std::string name;
  OpType op = OpType::kCount;
  int opset = 0;             // the model's opset for the op's domain
  AttrMap attrs;
  std::vector<int> inputs;   // value ids; -1 for an omitted optional input
  std::vector<int> outputs;  // value ids; -1 for an omitted optional output
};

class Graph {
 public:
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // graph inputs (runtime-provided), excluding constants
  std::vector<int> outputs;
  std::unordered_map<int, Tensor> constants;  // value id -> data
  int opset = 0;
  std::string name;

  int add_value(const std::string& name);
  // A new value holding constant `t` (its dtype and shape recorded).
  int add_constant(const std::string& name, Tensor t);
  // Id of the value with this name, or -1.
  int find_value(const std::string& name) const;
  bool is_constant(int v) const { return v >= 0 && constants.count(v) != 0; }
  const Tensor* constant(int v) const {
    auto it = constants.find(v);
    return it == constants.end() ? nullptr : &it->second;
  }
  // Recomputes Value::producer from the nodes.
  void relink();
  // Number of consumers (node inputs + graph outputs) of each value.
  std::vector<int> use_counts() const;
  // Checks structure: each value produced once, every input defined before use (so no cycles), ids in range.
  Status verify() const;
  // Reorders nodes topologically; an error naming the nodes on a cycle or reading undefined values.
  Status topo_sort();
  // Removes nodes that no graph output depends on, and unused constants.
  void remove_dead();
  // Human-readable dump, one node per line.
  std::string to_text() const;

 private:
  std::unordered_map<std::string, int> by_name_;
};

}  // namespace qd
