#include "ir/graph.h"

#include <algorithm>
#include <deque>
#include <sstream>

namespace qd {

int Graph::add_value(const std::string& name) {
  const int id = static_cast<int>(values.size());
  Value v;
  v.name = name;
  values.push_back(std::move(v));
  if (!name.empty()) by_name_[name] = id;
  return id;
}

int Graph::add_constant(const std::string& name, Tensor t) {
  const int v = add_value(name);
  values[v].dtype = t.dtype();
  values[v].shape = t.shape();
  values[v].has_shape = true;
  constants[v] = std::move(t);
  return v;
}

int Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

void Graph::relink() {
  for (auto& v : values) v.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int o : nodes[i].outputs) {
      if (o >= 0 && o < static_cast<int>(values.size())) values[o].producer = static_cast<int>(i);
    }
  }
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values.size(), 0);
  for (const auto& n : nodes) {
    for (int i : n.inputs) {
      if (i >= 0) ++uses[i];
    }
  }
  for (int o : outputs) ++uses[o];
  return uses;
}

Status Graph::verify() const {
  const int nv = static_cast<int>(values.size());
  std::vector<char> defined(values.size(), 0);
  for (int v : inputs) {
    if (v < 0 || v >= nv) return internal("graph input id out of range");
    defined[v] = 1;
  }
  for (const auto& [v, t] : constants) {
    if (v < 0 || v >= nv) return internal("constant id out of range");
    defined[v] = 1;
  }
  for (const auto& n : nodes) {
    for (int i : n.inputs) {
      if (i < -1 || i >= nv) return internal("input id out of range").at_node(n.name, op_name(n.op));
      if (i >= 0 && !defined[i]) {
        return invalid("input '" + values[i].name + "' is not produced by any earlier node, initializer or graph input")
            .at_node(n.name, op_name(n.op));
      }
    }
    for (int o : n.outputs) {
      if (o < -1 || o >= nv) return internal("output id out of range").at_node(n.name, op_name(n.op));
      if (o >= 0 && defined[o]) {
        return invalid("output '" + values[o].name + "' is produced more than once").at_node(n.name, op_name(n.op));
      }
      if (o >= 0) defined[o] = 1;
    }
  }
  for (int o : outputs) {
    if (o < 0 || o >= nv || !defined[o]) {
      return invalid("graph output '" + (o >= 0 && o < nv ? values[o].name : std::string("?")) +
                     "' is not produced by any node");
    }
  }
  return Status::ok();
}

Status Graph::topo_sort() {
  const size_t nn = nodes.size();
  std::vector<int> producer(values.size(), -1);
  for (size_t i = 0; i < nn; ++i) {
    for (int o : nodes[i].outputs) {
      if (o < 0) continue;
      if (producer[o] >= 0) {
        return invalid("value '" + values[o].name + "' is produced by two nodes ('" + nodes[producer[o]].name +
                       "' and '" + nodes[i].name + "')");
      }
      if (is_constant(o)) return invalid("value '" + values[o].name + "' is both an initializer and a node output");
      producer[o] = static_cast<int>(i);
    }
  }
  std::vector<char> available(values.size(), 0);
  for (int v : inputs) available[v] = 1;
  for (const auto& [v, t] : constants) available[v] = 1;
  std::vector<int> missing(nn, 0);
  std::vector<std::vector<int>> waiting(values.size());
  std::deque<int> ready;
  for (size_t i = 0; i < nn; ++i) {
    for (int in : nodes[i].inputs) {
      if (in < 0 || available[in]) continue;
      if (producer[in] < 0) {
        return invalid("input '" + values[in].name +
                       "' is not produced by any node, initializer or graph input (a dangling edge)")
            .at_node(nodes[i].name, op_name(nodes[i].op));
      }
      ++missing[i];
      waiting[in].push_back(static_cast<int>(i));
    }
    if (missing[i] == 0) ready.push_back(static_cast<int>(i));
  }
  std::vector<int> order;
  order.reserve(nn);
  while (!ready.empty()) {
    const int i = ready.front();
    ready.pop_front();
    order.push_back(i);
    for (int o : nodes[i].outputs) {
      if (o < 0) continue;
      for (int w : waiting[o]) {
        if (--missing[w] == 0) ready.push_back(w);
      }
      waiting[o].clear();
    }
  }
  if (order.size() != nn) {
    std::string names;
    int listed = 0;
    for (size_t i = 0; i < nn && listed < 8; ++i) {
      if (missing[i] > 0) {
        names += (listed++ ? ", '" : "'") + nodes[i].name + "'";
      }
    }
    return invalid("the graph has a cycle; nodes on or after it: " + names);
  }
  std::vector<Node> sorted;
  sorted.reserve(nn);
  for (int i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  relink();
  for (int o : outputs) {
    if (!available[o] && values[o].producer < 0) {
      return invalid("graph output '" + values[o].name + "' is not produced by any node");
    }
  }
  return Status::ok();
}

void Graph::remove_dead() {
  std::vector<char> live(values.size(), 0);
  for (int o : outputs) live[o] = 1;
  std::vector<char> keep(nodes.size(), 0);
  for (size_t i = nodes.size(); i-- > 0;) {
    bool needed = false;
    for (int o : nodes[i].outputs) needed |= (o >= 0 && live[o]);
    if (!needed) continue;
    keep[i] = 1;
    for (int in : nodes[i].inputs) {
      if (in >= 0) live[in] = 1;
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(nodes[i]));
  }
  nodes = std::move(kept);
  for (auto it = constants.begin(); it != constants.end();) {
    it = live[it->first] ? std::next(it) : constants.erase(it);
  }
  relink();
}

std::string Graph::to_text() const {
  std::ostringstream os;
  auto val = [&](int v) {
    if (v < 0) return std::string("_");
    const Value& x = values[v];
    std::string s = "%" + x.name;
    if (x.has_shape) s += std::string(":") + dtype_name(x.dtype) + "[" + shape_str(x.shape) + "]";
    if (is_constant(v)) s += "(const)";
    return s;
  };
  os << "graph " << name << " (opset " << opset << ")\n";
  for (int v : inputs) os << "  input " << val(v) << "\n";
  for (const auto& n : nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << val(n.outputs[i]);
    os << " = " << op_name(n.op) << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << val(n.inputs[i]);
    os << ")";
    if (!n.attrs.all().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs.all()) {
        os << (first ? "" : ", ") << k << "=" << attr_to_string(a);
        first = false;
      }
      os << "}";
    }
    os << "  # " << n.name << "\n";
  }
  for (int v : outputs) os << "  output " << val(v) << "\n";
  return os.str();
}

}  // namespace qd
