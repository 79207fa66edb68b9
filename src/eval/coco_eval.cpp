#include "eval/coco_eval.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace qd {

const std::array<const char*, kCocoNumStats> kCocoStatNames = {"AP",  "AP50", "AP75", "APs",   "APm", "APl",
                                                               "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};

std::vector<double> numpy_linspace(double start, double stop, int num) {
  std::vector<double> y;
  if (num <= 0) return y;
  y.resize(static_cast<size_t>(num));
  const int div = num - 1;
  if (div == 0) {
    y[0] = start;
    return y;
  }
  const double delta = stop - start;
  const double step = delta / div;
  for (int i = 0; i < num; ++i) {
    // Two roundings, as numpy does (y *= step; y += start): keep the compiler from fusing them into an FMA.
    volatile double scaled = static_cast<double>(i) * step;
    y[static_cast<size_t>(i)] = scaled + start;
  }
  y.back() = stop;
  return y;
}

namespace {

// pycocotools' bbIou (maskApi.c): IoU of boxes [x, y, w, h]; for a crowd ground truth the union is the
// detection's area.
inline double box_iou(const double* d, const double* g, bool crowd) {
  const double w = std::fmin(d[2] + d[0], g[2] + g[0]) - std::fmax(d[0], g[0]);
  if (w <= 0) return 0;
  const double h = std::fmin(d[3] + d[1], g[3] + g[1]) - std::fmax(d[1], g[1]);
  if (h <= 0) return 0;
  const double da = d[2] * d[3];
  const double ga = g[2] * g[3];
  const double i = w * h;
  const double u = crowd ? da : da + ga - i;
  return i / u;
}

// numpy's float64 add.reduce: pairwise summation (8-way unrolled, blocks of 128) inside iterator chunks of 8192.
double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

double numpy_mean(const std::vector<double>& v) {
  double sum = 0.;
  for (size_t s = 0; s < v.size(); s += 8192) sum += pairwise_sum(v.data() + s, std::min<size_t>(8192, v.size() - s));
  return sum / static_cast<double>(v.size());
}

Status validate(const CocoEvalParams& p) {
  if (p.iou_thrs.empty() || p.rec_thrs.empty() || p.max_dets.empty() || p.area_rngs.empty()) {
    return invalid("COCO eval params: iou_thrs, rec_thrs, max_dets and area_rngs must not be empty");
  }
  for (double t : p.iou_thrs) {
    if (!(t >= 0 && t <= 1)) return invalid("COCO eval params: IoU thresholds must lie in [0, 1]");
  }
  for (size_t i = 0; i < p.rec_thrs.size(); ++i) {
    if (!(p.rec_thrs[i] >= 0 && p.rec_thrs[i] <= 1) || (i > 0 && p.rec_thrs[i] < p.rec_thrs[i - 1])) {
      return invalid("COCO eval params: recall thresholds must be ascending values in [0, 1]");
    }
  }
  for (size_t i = 0; i < p.max_dets.size(); ++i) {
    if (p.max_dets[i] < 1 || (i > 0 && p.max_dets[i] < p.max_dets[i - 1])) {
      return invalid("COCO eval params: max_dets must be ascending positive counts (e.g. 1, 10, 100)");
    }
  }
  if (p.area_labels.size() != p.area_rngs.size()) {
    return invalid("COCO eval params: area_labels must name each of area_rngs");
  }
  for (const auto& r : p.area_rngs) {
    if (!(r[0] <= r[1])) return invalid("COCO eval params: an area range has its lower bound above its upper bound");
  }
  return Status::ok();
}

// Per (category, area range): the evaluated detections of every image, concatenated in image order.
struct Accum {
  std::vector<double> score;
  std::vector<int32_t> rank;    // position within its image's score-sorted list (for the maxDets cut)
  std::vector<uint8_t> state;   // [det][t]: 0 false positive, 1 true positive, 2 ignored
  size_t npig = 0;              // ground truths that are not ignored
  void clear() {
    score.clear();
    rank.clear();
    state.clear();
    npig = 0;
  }
};

enum : uint8_t { kFp = 0, kTp = 1, kIgnored = 2 };

// (cell, index) pairs, cell = category position * #images + image position; sorted by cell then file order.
using Keyed = std::vector<std::pair<int64_t, uint32_t>>;

// The matching and accumulation work of one evaluation (pycocotools' evaluateImg + accumulate).
class Evaluator {
 public:
  Evaluator(const CocoDataset& gt, const std::vector<CocoDetection>& dets, CocoEvalResult& res)
      : gt_(gt), dets_(dets), res_(res), p_(res.params), T_(p_.iou_thrs.size()), acc_(p_.area_rngs.size()) {
    for (double t : p_.iou_thrs) thr_.push_back(std::min(t, 1 - 1e-10));
  }

  void start_category() {
    for (auto& a : acc_) a.clear();
  }

  // evaluateImg for one image and category, every area range. g/d: indices into annotations / dets, file order.
  void add_image(const uint32_t* g_idx, size_t G, const uint32_t* d_idx, size_t D_all) {
    const size_t T = T_;
    // Detections by descending score (stable, as numpy's mergesort), cut at the largest maxDets.
    dt_sorted_.assign(d_idx, d_idx + D_all);
    std::stable_sort(dt_sorted_.begin(), dt_sorted_.end(),
                     [&](uint32_t x, uint32_t y) { return dets_[x].score > dets_[y].score; });
    const size_t max_det = static_cast<size_t>(p_.max_dets.back());
    if (dt_sorted_.size() > max_det) dt_sorted_.resize(max_det);
    const size_t D = dt_sorted_.size();

    ious_.resize(D * G);
    dt_area_.resize(D);
    for (size_t d = 0; d < D; ++d) {
      const double* db = dets_[dt_sorted_[d]].bbox;
      dt_area_[d] = db[2] * db[3];
      for (size_t g = 0; g < G; ++g) {
        const auto& ann = gt_.annotations[g_idx[g]];
        ious_[d * G + g] = box_iou(db, ann.bbox, ann.iscrowd);
      }
    }

    for (size_t a = 0; a < acc_.size(); ++a) {
      const double lo = p_.area_rngs[a][0], hi = p_.area_rngs[a][1];
      Accum& ac = acc_[a];
      // Ground truths: ignored when crowd or outside the area range; ignored ones go last (stable).
      gt_ig_.resize(G);
      for (size_t g = 0; g < G; ++g) {
        const auto& ann = gt_.annotations[g_idx[g]];
        gt_ig_[g] = (ann.iscrowd || ann.area < lo || ann.area > hi) ? 1 : 0;
      }
      gt_order_.resize(G);
      std::iota(gt_order_.begin(), gt_order_.end(), 0u);
      std::stable_partition(gt_order_.begin(), gt_order_.end(), [&](uint32_t g) { return gt_ig_[g] == 0; });
      gt_ig_s_.resize(G);
      gt_crowd_s_.resize(G);
      gt_id_s_.resize(G);
      for (size_t g = 0; g < G; ++g) {
        const auto& ann = gt_.annotations[g_idx[gt_order_[g]]];
        gt_ig_s_[g] = gt_ig_[gt_order_[g]];
        gt_crowd_s_[g] = ann.iscrowd ? 1 : 0;
        gt_id_s_[g] = ann.id;
        if (!gt_ig_s_[g]) ++ac.npig;
      }

      const size_t base = ac.score.size();
      for (size_t d = 0; d < D; ++d) {
        ac.score.push_back(dets_[dt_sorted_[d]].score);
        ac.rank.push_back(static_cast<int32_t>(d));
      }
      ac.state.resize((base + D) * T);
      for (size_t t = 0; t < T; ++t) {
        gt_matched_.assign(G, 0);
        for (size_t d = 0; d < D; ++d) {
          // Greedy: the best remaining ground truth with IoU >= threshold (the last of equals); a crowd one may take
          // any number of detections; once a regular one is found, the ignored ones (sorted last) are not tried.
          double best = thr_[t];
          long m = -1;
          const double* row = ious_.data() + d * G;
          for (size_t g = 0; g < G; ++g) {
            if (gt_matched_[g] && !gt_crowd_s_[g]) continue;
            if (m > -1 && gt_ig_s_[static_cast<size_t>(m)] == 0 && gt_ig_s_[g] == 1) break;
            const double v = row[gt_order_[g]];
            if (v < best) continue;
            best = v;
            m = static_cast<long>(g);
          }
          bool ignored = false;
          bool matched = false;  // pycocotools tests the matched ground truth's id, so id 0 reads as unmatched
          if (m > -1) {
            ignored = gt_ig_s_[static_cast<size_t>(m)] != 0;
            matched = gt_id_s_[static_cast<size_t>(m)] != 0;
            gt_matched_[static_cast<size_t>(m)] = 1;
          }
          if (!matched && (dt_area_[d] < lo || dt_area_[d] > hi)) ignored = true;
          ac.state[(base + d) * T + t] = ignored ? kIgnored : (matched ? kTp : kFp);
        }
      }
    }
  }

  // accumulate() for category position k: per area range and maxDets, all images' detections by descending score.
  void finish_category(size_t k) {
    const size_t T = T_, R = res_.R, K = res_.K, A = res_.A, M = res_.M;
    for (size_t a = 0; a < A; ++a) {
      const Accum& ac = acc_[a];
      if (ac.npig == 0) continue;  // no ground truth to find: precision and recall stay -1
      perm_.resize(ac.score.size());
      std::iota(perm_.begin(), perm_.end(), 0u);
      std::stable_sort(perm_.begin(), perm_.end(), [&](uint32_t x, uint32_t y) { return ac.score[x] > ac.score[y]; });
      const double npig = static_cast<double>(ac.npig);
      for (size_t m = 0; m < M; ++m) {
        sel_.clear();
        for (uint32_t j : perm_) {
          if (ac.rank[j] < p_.max_dets[m]) sel_.push_back(j);
        }
        const size_t nd = sel_.size();
        rc_.resize(nd);
        pr_.resize(nd);
        for (size_t t = 0; t < T; ++t) {
          double tp = 0, fp = 0;
          for (size_t j = 0; j < nd; ++j) {
            const uint8_t s = ac.state[static_cast<size_t>(sel_[j]) * T + t];
            if (s == kTp) tp += 1;
            if (s == kFp) fp += 1;
            rc_[j] = tp / npig;
            pr_[j] = tp / (fp + tp + std::numeric_limits<double>::epsilon());
          }
          res_.recall[((t * K + k) * A + a) * M + m] = nd ? rc_[nd - 1] : 0;
          // Precision envelope: make it non-increasing from the right.
          for (size_t j = nd; j-- > 1;) {
            if (pr_[j] > pr_[j - 1]) pr_[j - 1] = pr_[j];
          }
          // np.searchsorted(rc, recThrs, side='left'); thresholds past the last recall keep precision 0.
          for (size_t r = 0; r < R; ++r) {
            const size_t idx =
                static_cast<size_t>(std::lower_bound(rc_.begin(), rc_.end(), p_.rec_thrs[r]) - rc_.begin());
            res_.precision[(((t * R + r) * K + k) * A + a) * M + m] = idx < nd ? pr_[idx] : 0.0;
          }
        }
      }
    }
  }

 private:
  const CocoDataset& gt_;
  const std::vector<CocoDetection>& dets_;
  CocoEvalResult& res_;
  const CocoEvalParams& p_;
  const size_t T_;
  std::vector<double> thr_;
  std::vector<Accum> acc_;
  // scratch, reused across images
  std::vector<uint32_t> dt_sorted_, gt_order_, perm_, sel_;
  std::vector<double> ious_, dt_area_, rc_, pr_;
  std::vector<uint8_t> gt_ig_, gt_crowd_s_, gt_ig_s_, gt_matched_;
  std::vector<int64_t> gt_id_s_;
};

}  // namespace

Expected<CocoEvalResult> evaluate_coco_bbox(const CocoDataset& gt, const std::vector<CocoDetection>& dets,
                                            const CocoEvalParams& params, const CocoProgressFn& progress) {
  QD_RETURN_IF_ERROR(validate(params));
  CocoEvalResult res;
  res.params = params;
  const CocoEvalParams& p = res.params;

  // Images (np.unique of params.imgIds) and categories (sorted ids).
  std::unordered_set<int64_t> all_images;
  all_images.reserve(gt.images.size() * 2);
  for (const auto& im : gt.images) all_images.insert(im.id);
  std::vector<int64_t> img_ids = params.img_ids;
  if (img_ids.empty()) {
    for (const auto& im : gt.images) img_ids.push_back(im.id);
  } else {
    for (int64_t id : img_ids) {
      if (!all_images.count(id)) {
        return invalid("image id " + std::to_string(id) + " was asked for but the annotations do not list it");
      }
    }
  }
  std::sort(img_ids.begin(), img_ids.end());
  img_ids.erase(std::unique(img_ids.begin(), img_ids.end()), img_ids.end());
  res.params.img_ids = img_ids;
  for (const auto& c : gt.categories) res.cat_ids.push_back(c.id);
  std::sort(res.cat_ids.begin(), res.cat_ids.end());
  res.cat_ids.erase(std::unique(res.cat_ids.begin(), res.cat_ids.end()), res.cat_ids.end());

  const size_t I = img_ids.size(), K = res.cat_ids.size();
  const size_t T = p.iou_thrs.size(), R = p.rec_thrs.size(), A = p.area_rngs.size(), M = p.max_dets.size();
  res.T = T, res.R = R, res.K = K, res.A = A, res.M = M;
  const size_t cells = T * R * K * A * M;
  if (K > 0 && cells / K != T * R * A * M) return invalid("COCO eval: too many categories x thresholds");
  if (cells > (size_t{1} << 31)) {
    return invalid("COCO eval: " + std::to_string(K) + " categories x " + std::to_string(T) + " IoU x " +
                   std::to_string(R) + " recall thresholds is too large a precision table");
  }
  res.precision.assign(cells, -1.0);
  res.recall.assign(T * K * A * M, -1.0);
  res.num_detections = dets.size();
  if (dets.size() > std::numeric_limits<uint32_t>::max() || gt.annotations.size() > std::numeric_limits<uint32_t>::max()) {
    return invalid("COCO eval: more than 2^32 annotations or detections");
  }

  std::unordered_map<int64_t, uint32_t> img_pos, cat_pos;
  img_pos.reserve(I * 2);
  for (size_t i = 0; i < I; ++i) img_pos[img_ids[i]] = static_cast<uint32_t>(i);
  for (size_t k = 0; k < K; ++k) cat_pos[res.cat_ids[k]] = static_cast<uint32_t>(k);

  // Group ground truths and detections by (category, image), keeping file order inside a group (pycocotools' _gts
  // and _dts). Only non-empty groups exist, so memory does not grow with images x categories.
  Keyed gts, dts;
  gts.reserve(gt.annotations.size());
  for (size_t j = 0; j < gt.annotations.size(); ++j) {
    const auto& a = gt.annotations[j];
    auto ii = img_pos.find(a.image_id);
    auto kk = cat_pos.find(a.category_id);
    if (ii == img_pos.end() || kk == cat_pos.end()) continue;
    gts.emplace_back(static_cast<int64_t>(kk->second) * static_cast<int64_t>(I) + ii->second, static_cast<uint32_t>(j));
  }
  dts.reserve(dets.size());
  for (size_t j = 0; j < dets.size(); ++j) {
    const auto& d = dets[j];
    auto ii = img_pos.find(d.image_id);
    if (ii == img_pos.end()) {
      if (!all_images.count(d.image_id)) {
        return invalid("detection #" + std::to_string(j) + " is on image_id " + std::to_string(d.image_id) +
                       ", which the annotations do not list: the results are for another dataset, or the image ids "
                       "were not mapped back to the dataset's");
      }
      ++res.num_outside_img_ids;
      continue;
    }
    auto kk = cat_pos.find(d.category_id);
    if (kk == cat_pos.end()) {
      ++res.num_unknown_category;
      auto& ex = res.unknown_category_examples;
      if (ex.size() < 8 && std::find(ex.begin(), ex.end(), d.category_id) == ex.end()) ex.push_back(d.category_id);
      continue;
    }
    dts.emplace_back(static_cast<int64_t>(kk->second) * static_cast<int64_t>(I) + ii->second, static_cast<uint32_t>(j));
  }
  std::sort(gts.begin(), gts.end());
  std::sort(dts.begin(), dts.end());

  Evaluator ev(gt, dets, res);
  std::vector<uint32_t> g_idx, d_idx;
  size_t gi = 0, di = 0;
  int64_t cur_k = -1;
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  while (gi < gts.size() || di < dts.size()) {
    const int64_t cell = std::min(gi < gts.size() ? gts[gi].first : kEnd, di < dts.size() ? dts[di].first : kEnd);
    const int64_t k = cell / static_cast<int64_t>(I);
    if (k != cur_k) {
      if (cur_k >= 0) ev.finish_category(static_cast<size_t>(cur_k));
      if (progress) progress("evaluating categories", static_cast<size_t>(k), K);
      ev.start_category();
      cur_k = k;
    }
    g_idx.clear();
    d_idx.clear();
    for (; gi < gts.size() && gts[gi].first == cell; ++gi) g_idx.push_back(gts[gi].second);
    for (; di < dts.size() && dts[di].first == cell; ++di) d_idx.push_back(dts[di].second);
    ev.add_image(g_idx.data(), g_idx.size(), d_idx.data(), d_idx.size());
  }
  if (cur_k >= 0) ev.finish_category(static_cast<size_t>(cur_k));
  if (progress) progress("evaluating categories", K, K);

  const bool three = p.max_dets.size() >= 3;
  auto entry = [&](bool ap, double iou, const char* area, size_t md_index, int literal_md = 0) {
    if (!three) return -1.0;
    return coco_summarize_entry(res, ap, iou, area, literal_md ? literal_md : p.max_dets[md_index]);
  };
  // pycocotools' _summarizeDets(); its first line uses the literal maxDets=100.
  res.stats = {entry(true, -1, "all", 0, 100),   entry(true, 0.5, "all", 2),    entry(true, 0.75, "all", 2),
               entry(true, -1, "small", 2),      entry(true, -1, "medium", 2),  entry(true, -1, "large", 2),
               entry(false, -1, "all", 0),       entry(false, -1, "all", 1),    entry(false, -1, "all", 2),
               entry(false, -1, "small", 2),     entry(false, -1, "medium", 2), entry(false, -1, "large", 2)};
  return res;
}

double coco_summarize_entry(const CocoEvalResult& r, bool ap, double iou_thr, const std::string& area_label,
                            int max_dets) {
  const auto& p = r.params;
  std::vector<size_t> ts, as, ms;
  for (size_t t = 0; t < r.T; ++t) {
    if (iou_thr < 0 || p.iou_thrs[t] == iou_thr) ts.push_back(t);
  }
  for (size_t a = 0; a < r.A; ++a) {
    if (p.area_labels[a] == area_label) as.push_back(a);
  }
  for (size_t m = 0; m < r.M; ++m) {
    if (p.max_dets[m] == max_dets) ms.push_back(m);
  }
  // pycocotools indexes s[:, :, :, aind, mind]: the two index lists pair up elementwise (numpy fancy indexing).
  const size_t n_am = std::min(as.size(), ms.size());
  std::vector<double> vals;
  for (size_t t : ts) {
    if (ap) {
      for (size_t rr = 0; rr < r.R; ++rr) {
        for (size_t k = 0; k < r.K; ++k) {
          for (size_t j = 0; j < n_am; ++j) {
            const double v = r.precision_at(t, rr, k, as[j], ms[j]);
            if (v > -1) vals.push_back(v);
          }
        }
      }
    } else {
      for (size_t k = 0; k < r.K; ++k) {
        for (size_t j = 0; j < n_am; ++j) {
          const double v = r.recall_at(t, k, as[j], ms[j]);
          if (v > -1) vals.push_back(v);
        }
      }
    }
  }
  if (vals.empty()) return -1;
  return numpy_mean(vals);
}

std::vector<double> coco_per_category_ap(const CocoEvalResult& r, double iou_thr) {
  std::vector<double> out(r.K, -1);
  if (r.A == 0 || r.M == 0) return out;
  size_t a_all = 0;
  for (size_t a = 0; a < r.A; ++a) {
    if (r.params.area_labels[a] == "all") a_all = a;
  }
  const size_t m = r.M - 1;
  for (size_t k = 0; k < r.K; ++k) {
    std::vector<double> vals;
    for (size_t t = 0; t < r.T; ++t) {
      if (iou_thr >= 0 && r.params.iou_thrs[t] != iou_thr) continue;
      for (size_t rr = 0; rr < r.R; ++rr) {
        const double v = r.precision_at(t, rr, k, a_all, m);
        if (v > -1) vals.push_back(v);
      }
    }
    if (!vals.empty()) out[k] = numpy_mean(vals);
  }
  return out;
}

std::string format_coco_summary(const CocoEvalResult& r) {
  const auto& p = r.params;
  std::string out;
  struct Line {
    bool ap;
    double iou;
    const char* area;
  };
  const Line lines[kCocoNumStats] = {{true, -1, "all"},    {true, 0.5, "all"},     {true, 0.75, "all"},
                                     {true, -1, "small"},  {true, -1, "medium"},   {true, -1, "large"},
                                     {false, -1, "all"},   {false, -1, "all"},     {false, -1, "all"},
                                     {false, -1, "small"}, {false, -1, "medium"},  {false, -1, "large"}};
  auto md = [&](size_t i) { return i < p.max_dets.size() ? p.max_dets[i] : 0; };
  const int max_dets[kCocoNumStats] = {100, md(2), md(2), md(2), md(2), md(2), md(0), md(1), md(2), md(2), md(2), md(2)};
  for (int i = 0; i < kCocoNumStats; ++i) {
    const Line& l = lines[i];
    // ' {:<18} {} @[ IoU={:<9} | area={:>6s} | maxDets={:>3d} ] = {:0.3f}'
    char iou[64];
    if (l.iou < 0) {
      std::snprintf(iou, sizeof iou, "%0.2f:%0.2f", p.iou_thrs.front(), p.iou_thrs.back());
    } else {
      std::snprintf(iou, sizeof iou, "%0.2f", l.iou);
    }
    char line[256];
    std::snprintf(line, sizeof line, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  l.ap ? "Average Precision" : "Average Recall", l.ap ? "(AP)" : "(AR)", iou, l.area, max_dets[i],
                  r.stats[static_cast<size_t>(i)]);
    out += line;
  }
  return out;
}

std::string coco_summary_json(const CocoEvalResult& r, const CocoDataset* ds) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json stats = nlohmann::ordered_json::object();
  for (int i = 0; i < kCocoNumStats; ++i) stats[kCocoStatNames[static_cast<size_t>(i)]] = r.stats[static_cast<size_t>(i)];
  j["stats"] = stats;
  j["stats_list"] = r.stats;
  j["num_images"] = r.params.img_ids.size();
  j["num_categories"] = r.K;
  j["num_detections"] = r.num_detections;
  j["num_detections_unknown_category"] = r.num_unknown_category;
  std::unordered_map<int64_t, std::string> names;
  if (ds != nullptr) {
    for (const auto& c : ds->categories) names[c.id] = c.name;
  }
  const auto ap = coco_per_category_ap(r);
  const auto ap50 = coco_per_category_ap(r, 0.5);
  nlohmann::ordered_json cats = nlohmann::ordered_json::array();
  for (size_t k = 0; k < r.K; ++k) {
    nlohmann::ordered_json c;
    c["id"] = r.cat_ids[k];
    if (ds != nullptr) c["name"] = names[r.cat_ids[k]];
    c["ap"] = ap[k];
    c["ap50"] = ap50[k];
    cats.push_back(std::move(c));
  }
  j["per_category"] = std::move(cats);
  return j.dump(2) + "\n";
}

}  // namespace qd
