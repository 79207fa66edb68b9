// Einsum: a sum of products over labelled dims ("bij,bjk->bik"), with repeated labels (diagonals), an implicit output
// (labels seen once, sorted), and "..." for broadcast dims. The reference loops over every label combination.
#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "ops/common.h"

namespace qd::ops {

namespace {

// Labels 0..51 are letters; 52.. are the dims "..." stands for (right-aligned across operands).
constexpr int kEllipsisBase = 52;
// Refuse contractions whose reference loop would run longer than this many multiply-adds.
constexpr int64_t kMaxWork = int64_t{1} << 36;

struct EinsumPlan {
  std::vector<std::vector<int>> in_labels;  // per operand, per dim
  std::vector<int> out_labels;
  std::vector<int> labels;                  // output labels, then summed ones
  std::vector<int64_t> size;                // by label (index 0..kEllipsisBase + max ellipsis rank)
  Shape out;
};

int letter_label(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

// Parses one term into letter labels, with -2 marking where "..." stands.
Expected<std::vector<int>> parse_term(const std::string& t) {
  std::vector<int> out;
  bool ellipsis = false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '.') {
      if (ellipsis || t.compare(i, 3, "...") != 0) return invalid("bad '...' in Einsum term '" + t + "'");
      ellipsis = true;
      out.push_back(-2);
      i += 2;
      continue;
    }
    const int l = letter_label(t[i]);
    if (l < 0) return invalid(std::string("Einsum equation has an invalid character '") + t[i] + "' (labels are letters)");
    out.push_back(l);
  }
  return out;
}

// The plan of Einsum node n at these input shapes, whatever its work.
Expected<EinsumPlan> einsum_plan_of(const Node& n, const std::vector<Shape>& shapes) {
  std::string eq = QD_TRY(n.attrs.get_string("equation"));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size()) {
    return invalid("Einsum equation '" + eq + "' has " + std::to_string(terms.size()) + " operand terms but the node has " +
                   std::to_string(shapes.size()) + " inputs");
  }
  EinsumPlan p;
  // Operand labels, with "..." expanded to the operand's extra dims.
  size_t max_ell = 0;
  std::vector<std::vector<int>> parsed;
  for (size_t i = 0; i < terms.size(); ++i) parsed.push_back(QD_TRY(parse_term(terms[i])));
  for (size_t i = 0; i < terms.size(); ++i) {
    const bool has_ell = std::count(parsed[i].begin(), parsed[i].end(), -2) > 0;
    const size_t letters = parsed[i].size() - (has_ell ? 1 : 0);
    if (shapes[i].size() < letters || (!has_ell && shapes[i].size() != letters)) {
      return invalid("Einsum term '" + terms[i] + "' does not match input " + std::to_string(i) + " of shape " +
                     shape_str(shapes[i]));
    }
    if (has_ell) max_ell = std::max(max_ell, shapes[i].size() - letters);
  }
  p.size.assign(kEllipsisBase + max_ell, -1);
  for (size_t i = 0; i < terms.size(); ++i) {
    const bool has_ell = std::count(parsed[i].begin(), parsed[i].end(), -2) > 0;
    const size_t ell = has_ell ? shapes[i].size() - (parsed[i].size() - 1) : 0;
    std::vector<int> labels;
    for (int l : parsed[i]) {
      if (l != -2) {
        labels.push_back(l);
        continue;
      }
      for (size_t e = 0; e < ell; ++e) labels.push_back(static_cast<int>(kEllipsisBase + max_ell - ell + e));
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      const int l = labels[d];
      const int64_t s = shapes[i][d];
      int64_t& known = p.size[l];
      if (known < 0 || (l >= kEllipsisBase && known == 1)) known = s;
      else if (s != known && !(l >= kEllipsisBase && s == 1)) {
        return invalid("Einsum label sizes disagree: input " + std::to_string(i) + " dim " + std::to_string(d) + " is " +
                       std::to_string(s) + ", elsewhere " + std::to_string(known));
      }
    }
    p.in_labels.push_back(std::move(labels));
  }
  // Output labels: explicit, or "..." then letters used exactly once, alphabetically.
  std::vector<int> count(p.size.size(), 0);
  for (const auto& ls : p.in_labels) {
    for (int l : ls) ++count[l];
  }
  if (arrow != std::string::npos) {
    const std::vector<int> o = QD_TRY(parse_term(eq.substr(arrow + 2)));
    for (int l : o) {
      if (l == -2) {
        for (size_t e = 0; e < max_ell; ++e) p.out_labels.push_back(static_cast<int>(kEllipsisBase + e));
        continue;
      }
      if (count[l] == 0) {
        const char ch = static_cast<char>(l < 26 ? 'a' + l : 'A' + (l - 26));
        return invalid("Einsum output label '" + std::string(1, ch) + "' appears in no input term");
      }
      if (std::find(p.out_labels.begin(), p.out_labels.end(), l) != p.out_labels.end()) {
        return invalid("Einsum output repeats a label");
      }
      p.out_labels.push_back(l);
    }
  } else {
    for (size_t e = 0; e < max_ell; ++e) p.out_labels.push_back(static_cast<int>(kEllipsisBase + e));
    for (int k = 0; k < kEllipsisBase; ++k) {
      const int l = (k + 26) % kEllipsisBase;  // ASCII order, as numpy: 'A'..'Z' before 'a'..'z'
      if (count[l] == 1) p.out_labels.push_back(l);
    }
  }
  p.labels = p.out_labels;
  for (size_t l = 0; l < p.size.size(); ++l) {
    if (count[l] > 0 && std::find(p.out_labels.begin(), p.out_labels.end(), static_cast<int>(l)) == p.out_labels.end()) {
      p.labels.push_back(static_cast<int>(l));
    }
  }
  for (int l : p.out_labels) p.out.push_back(p.size[l] < 0 ? 1 : p.size[l]);
  return p;
}

// The reference loop's multiplies: every label combination, times the operands. A double: dims near 2^31 per label
// pass int64.
double plan_work(const EinsumPlan& p) {
  double work = 1;
  for (int l : p.labels) work *= static_cast<double>(std::max<int64_t>(p.size[l], 1));
  return work * static_cast<double>(p.in_labels.size());
}

Expected<EinsumPlan> einsum_plan(const Node& n, const std::vector<Shape>& shapes) {
  EinsumPlan p = QD_TRY(einsum_plan_of(n, shapes));
  const double work = plan_work(p);
  if (work > static_cast<double>(kMaxWork)) {
    char work_text[32];
    std::snprintf(work_text, sizeof work_text, "%.3g", work);
    return unsupported("Einsum '" + *n.attrs.get_string("equation") + "' needs about " + work_text +
                       " multiply-adds in the reference kernel (limit 2^36); rewrite it as MatMul");
  }
  return p;
}

template <typename T>
void einsum_kernel(const EinsumPlan& p, const std::vector<const Tensor*>& in, Tensor& y) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
  const size_t nl = p.labels.size(), ni = in.size();
  T* yp = y.data<T>();
  for (const Tensor* t : in) {
    if (t->numel() == 0) {  // a sum over nothing (and no product of an empty operand's dims)
      for (int64_t i = 0; i < y.numel(); ++i) yp[i] = T(0);
      return;
    }
  }
  // stride[i][j]: step in operand i when label j (in p.labels order) advances; 0 where broadcast.
  std::vector<std::vector<int64_t>> stride(ni, std::vector<int64_t>(nl, 0));
  for (size_t i = 0; i < ni; ++i) {
    const std::vector<int64_t> st = strides_of(in[i]->shape());
    for (size_t d = 0; d < p.in_labels[i].size(); ++d) {
      if (in[i]->shape()[d] == 1) continue;
      const size_t j = std::find(p.labels.begin(), p.labels.end(), p.in_labels[i][d]) - p.labels.begin();
      stride[i][j] += st[d];  // a repeated label walks the diagonal
    }
  }
  std::vector<int64_t> ext(nl);
  for (size_t j = 0; j < nl; ++j) ext[j] = p.size[p.labels[j]];
  const size_t no = p.out_labels.size();
  std::vector<int64_t> out_stride(no, 1);
  for (size_t j = no; j-- > 1;) out_stride[j - 1] = out_stride[j] * ext[j];
  std::vector<Acc> acc(static_cast<size_t>(y.numel()), Acc(0));
  bool empty = false;
  for (int64_t e : ext) empty |= e == 0;
  std::vector<int64_t> idx(nl, 0), off(ni, 0);
  int64_t out_off = 0;
  while (!empty) {
    Acc prod = 1;
    for (size_t i = 0; i < ni; ++i) prod *= static_cast<Acc>(in[i]->data<T>()[off[i]]);
    acc[out_off] += prod;
    size_t j = nl;
    for (; j-- > 0;) {
      for (size_t i = 0; i < ni; ++i) off[i] += stride[i][j];
      if (j < no) out_off += out_stride[j];
      if (++idx[j] < ext[j]) break;
      for (size_t i = 0; i < ni; ++i) off[i] -= stride[i][j] * idx[j];
      if (j < no) out_off -= out_stride[j] * idx[j];
      idx[j] = 0;
    }
    if (j == static_cast<size_t>(-1)) break;
  }
  for (size_t i = 0; i < acc.size(); ++i) yp[i] = static_cast<T>(acc[i]);
}

}  // namespace

Expected<double> einsum_work(const Node& n, const std::vector<Shape>& shapes) {
  return plan_work(QD_TRY(einsum_plan_of(n, shapes)));
}

Status infer_Einsum(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  const DType t = c.dtype(0);
  if (t == DType::kBool || t == DType::kFloat16 || t == DType::kString) {
    return unsupported(std::string("Einsum on ") + dtype_name(t) + " (numeric types other than float16 only)");
  }
  std::vector<Shape> shapes;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) return invalid("Einsum inputs cannot be omitted");
    shapes.push_back(c.shape(i));
  }
  const EinsumPlan p = QD_TRY(einsum_plan(c.node, shapes));
  c.set_output(0, c.dtype(0), p.out);
  return Status::ok();
}

Status run_Einsum(KernelCtx& c) {
  std::vector<Shape> shapes;
  for (const Tensor* t : c.in) shapes.push_back(t->shape());
  const EinsumPlan p = QD_TRY(einsum_plan(c.node, shapes));
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    einsum_kernel<decltype(tag)>(p, c.in, *c.out[0]);
    return Status::ok();
  });
}

}  // namespace qd::ops
