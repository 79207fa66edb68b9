#include "tasks/fmnist_det.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_io.h"
#include "tasks/parallel.h"

namespace qd {

namespace {

// ---------------------------------------------------------------- canvas and colours
// Only +, -, *, / and sqrt (exactly rounded in IEEE arithmetic) touch pixels, so a scene is the same bytes on any
// x86-64 build; exp/log pick item sizes only (rounded to whole pixels).

struct Rgb {
  float r = 0, g = 0, b = 0;
};

float luma(const Rgb& c) { return 0.299f * c.r + 0.587f * c.g + 0.114f * c.b; }
float clampf(float v, float lo, float hi) { return std::min(hi, std::max(lo, v)); }

Rgb random_color(SplitMix64& rng) { return {rng.uniform(0.f, 255.f), rng.uniform(0.f, 255.f), rng.uniform(0.f, 255.f)}; }

// A second colour near `c`: each channel moves by `lo`..`hi` in a random direction.
Rgb nearby_color(SplitMix64& rng, const Rgb& c, float lo, float hi) {
  auto move = [&](float v) {
    const float d = rng.uniform(lo, hi);
    float out = rng.chance(0.5f) ? v + d : v - d;
    if (out < 0.f || out > 255.f) out = rng.chance(0.5f) ? v + d * 0.5f : v - d * 0.5f;
    return clampf(out, 0.f, 255.f);
  };
  return {move(c.r), move(c.g), move(c.b)};
}

struct Canvas {
  int w, h;
  std::vector<float> px;  // RGB, 0..255
  Canvas(int w_, int h_) : w(w_), h(h_), px(static_cast<size_t>(w_) * h_ * 3, 0.f) {}
  float* at(int x, int y) { return px.data() + (static_cast<size_t>(y) * w + x) * 3; }
  void set(int x, int y, const Rgb& c) {
    float* p = at(x, y);
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }
  void blend(int x, int y, const Rgb& c, float a) {
    float* p = at(x, y);
    p[0] += (c.r - p[0]) * a;
    p[1] += (c.g - p[1]) * a;
    p[2] += (c.b - p[2]) * a;
  }
};

Rgb lerp(const Rgb& a, const Rgb& b, float t) {
  return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

void random_direction(SplitMix64& rng, float* dx, float* dy) {
  for (;;) {
    const float x = rng.uniform(-1.f, 1.f), y = rng.uniform(-1.f, 1.f);
    const float n2 = x * x + y * y;
    if (n2 > 0.01f && n2 <= 1.f) {
      const float n = std::sqrt(n2);
      *dx = x / n;
      *dy = y / n;
      return;
    }
  }
}

float smooth(float t) { return t * t * (3.f - 2.f * t); }

// ---------------------------------------------------------------- backgrounds
void bg_linear(Canvas& c, SplitMix64& rng) {
  const Rgb c0 = random_color(rng), c1 = random_color(rng);
  float dx, dy;
  random_direction(rng, &dx, &dy);
  const float ext = std::fabs(c.w * dx) + std::fabs(c.h * dy);
  for (int y = 0; y < c.h; ++y) {
    for (int x = 0; x < c.w; ++x) {
      const float t = clampf(((x - c.w * 0.5f) * dx + (y - c.h * 0.5f) * dy) / ext + 0.5f, 0.f, 1.f);
      c.set(x, y, lerp(c0, c1, t));
    }
  }
}

void bg_radial(Canvas& c, SplitMix64& rng) {
  const Rgb c0 = random_color(rng), c1 = random_color(rng);
  const float cx = rng.uniform(0.f, static_cast<float>(c.w)), cy = rng.uniform(0.f, static_cast<float>(c.h));
  const float radius = rng.uniform(250.f, 900.f);
  const int rings = rng.chance(0.3f) ? rng.range(2, 6) : 1;  // sometimes concentric bands
  for (int y = 0; y < c.h; ++y) {
    for (int x = 0; x < c.w; ++x) {
      const float d = std::sqrt((x - cx) * (x - cx) + (y - cy) * (y - cy)) / radius * rings;
      float t = d - std::floor(d);
      if (d >= rings) t = 1.f;
      c.set(x, y, lerp(c0, c1, t));
    }
  }
}

// Smooth value noise: random colour offsets on a coarse grid, interpolated with smoothstep; `octaves` finer layers.
void add_value_noise(Canvas& c, SplitMix64& rng, float cell, float amp, int octaves) {
  for (int o = 0; o < octaves; ++o) {
    const int gw = static_cast<int>(c.w / cell) + 2, gh = static_cast<int>(c.h / cell) + 2;
    std::vector<float> grid(static_cast<size_t>(gw) * gh * 3);
    for (float& v : grid) v = rng.uniform(-amp, amp);
    for (int y = 0; y < c.h; ++y) {
      const float gy = y / cell;
      const int iy = static_cast<int>(gy);
      const float ty = smooth(gy - iy);
      for (int x = 0; x < c.w; ++x) {
        const float gx = x / cell;
        const int ix = static_cast<int>(gx);
        const float tx = smooth(gx - ix);
        const float* g00 = &grid[(static_cast<size_t>(iy) * gw + ix) * 3];
        const float* g01 = g00 + 3;
        const float* g10 = g00 + static_cast<size_t>(gw) * 3;
        const float* g11 = g10 + 3;
        float* p = c.at(x, y);
        for (int k = 0; k < 3; ++k) {
          const float top = g00[k] + (g01[k] - g00[k]) * tx, bot = g10[k] + (g11[k] - g10[k]) * tx;
          p[k] += top + (bot - top) * ty;
        }
      }
    }
    cell *= 0.5f;
    amp *= 0.5f;
  }
}

void bg_noise(Canvas& c, SplitMix64& rng) {
  const Rgb base = random_color(rng);
  for (int y = 0; y < c.h; ++y) {
    for (int x = 0; x < c.w; ++x) c.set(x, y, base);
  }
  add_value_noise(c, rng, rng.uniform(40.f, 220.f), rng.uniform(40.f, 110.f), rng.range(1, 4));
}

void bg_stripes(Canvas& c, SplitMix64& rng) {
  const Rgb c0 = random_color(rng), c1 = nearby_color(rng, c0, 30.f, 120.f);
  float dx, dy;
  random_direction(rng, &dx, &dy);
  const float period = rng.uniform(10.f, 90.f), duty = rng.uniform(0.25f, 0.75f), soft = rng.uniform(0.6f, 6.f);
  const float phase = rng.uniform();
  for (int y = 0; y < c.h; ++y) {
    for (int x = 0; x < c.w; ++x) {
      const float u = (x * dx + y * dy) / period + phase;
      const float f = u - std::floor(u);
      const float dist = std::min(std::min(f, std::fabs(f - duty)), 1.f - f) * period;  // pixels to an edge
      const float e = std::min(dist / soft, 1.f) * 0.5f;
      c.set(x, y, lerp(c0, c1, f < duty ? 0.5f + e : 0.5f - e));
    }
  }
}

void bg_checker(Canvas& c, SplitMix64& rng) {
  const Rgb c0 = random_color(rng), c1 = nearby_color(rng, c0, 30.f, 120.f);
  float dx = 1.f, dy = 0.f;
  if (rng.chance(0.5f)) random_direction(rng, &dx, &dy);
  const float cell = rng.uniform(12.f, 90.f), ou = rng.uniform(0.f, 2.f), ov = rng.uniform(0.f, 2.f);
  for (int y = 0; y < c.h; ++y) {
    for (int x = 0; x < c.w; ++x) {
      const float u = (x * dx + y * dy) / cell + ou, v = (y * dx - x * dy) / cell + ov;
      const int64_t parity = static_cast<int64_t>(std::floor(u)) + static_cast<int64_t>(std::floor(v));
      c.set(x, y, (parity & 1) ? c1 : c0);
    }
  }
}

void bg_blobs(Canvas& c, SplitMix64& rng) {
  bg_linear(c, rng);
  const int n = rng.range(3, 12);
  for (int i = 0; i < n; ++i) {
    const Rgb col = random_color(rng);
    const float cx = rng.uniform(-60.f, c.w + 60.f), cy = rng.uniform(-60.f, c.h + 60.f);
    const float r = rng.uniform(40.f, 280.f), opacity = rng.uniform(0.4f, 1.f);
    const int x0 = std::max(0, static_cast<int>(cx - r)), x1 = std::min(c.w - 1, static_cast<int>(cx + r) + 1);
    const int y0 = std::max(0, static_cast<int>(cy - r)), y1 = std::min(c.h - 1, static_cast<int>(cy + r) + 1);
    for (int y = y0; y <= y1; ++y) {
      for (int x = x0; x <= x1; ++x) {
        const float d2 = ((x - cx) * (x - cx) + (y - cy) * (y - cy)) / (r * r);
        if (d2 >= 1.f) continue;
        const float q = 1.f - d2;
        c.blend(x, y, col, q * q * opacity);  // smooth (C1) falloff, a polynomial stand-in for a gaussian blur
      }
    }
  }
}

constexpr int kBackgroundKinds = 6;

void draw_background(Canvas& c, SplitMix64& rng) {
  switch (rng.range(0, kBackgroundKinds - 1)) {
    case 0: bg_linear(c, rng); break;
    case 1: bg_radial(c, rng); break;
    case 2: bg_noise(c, rng); break;
    case 3: bg_stripes(c, rng); break;
    case 4: bg_checker(c, rng); break;
    default: bg_blobs(c, rng); break;
  }
  if (rng.chance(0.35f)) add_value_noise(c, rng, rng.uniform(60.f, 200.f), rng.uniform(10.f, 45.f), 2);
  for (float& v : c.px) v = clampf(v, 0.f, 255.f);
}

// ---------------------------------------------------------------- items
struct Item {
  int cls = 0, glyph = 0;
  int x0 = 0, y0 = 0, w = 0, h = 0;
  Rgb tint;
  std::vector<float> ink;    // w*h, the resampled glyph intensity in [0, 1]
  std::vector<float> alpha;  // w*h, min(1, kAlphaGain * ink)
  int own = 0;               // pixels with alpha above the threshold
};

// Fashion-MNIST ink is rarely full intensity inside a garment; a gain makes items mostly opaque, so they read as
// objects rather than ghosts, while faint edges stay soft.
constexpr float kAlphaGain = 1.5f;
// Item colour: the tint, darker where the ink is faint, so the garment's own texture shows.
Rgb shade(const Rgb& tint, float ink) {
  const float k = 0.45f + 0.55f * ink;
  return {tint.r * k, tint.g * k, tint.b * k};
}

// The glyph resampled to w x h (bilinear, pixel centres, zero outside), as ink intensity in [0, 1].
std::vector<float> glyph_ink(const FmnistSplit& ds, int glyph, int w, int h, bool flip) {
  std::vector<float> a(static_cast<size_t>(w) * h);
  const uint8_t* g = ds.image(glyph);
  const int gw = ds.cols, gh = ds.rows;
  auto at = [&](int x, int y) -> float {
    if (x < 0 || y < 0 || x >= gw || y >= gh) return 0.f;
    return g[y * gw + (flip ? gw - 1 - x : x)] * (1.f / 255.f);
  };
  const float sx = static_cast<float>(gw) / w, sy = static_cast<float>(gh) / h;
  for (int y = 0; y < h; ++y) {
    const float fy = (y + 0.5f) * sy - 0.5f;
    const int iy = static_cast<int>(std::floor(fy));
    const float ty = fy - iy;
    for (int x = 0; x < w; ++x) {
      const float fx = (x + 0.5f) * sx - 0.5f;
      const int ix = static_cast<int>(std::floor(fx));
      const float tx = fx - ix;
      const float top = at(ix, iy) + (at(ix + 1, iy) - at(ix, iy)) * tx;
      const float bot = at(ix, iy + 1) + (at(ix + 1, iy + 1) - at(ix, iy + 1)) * tx;
      a[static_cast<size_t>(y) * w + x] = top + (bot - top) * ty;
    }
  }
  return a;
}

int overlap(const Item& a, int x0, int y0, int w, int h) {
  const int ix = std::min(a.x0 + a.w, x0 + w) - std::max(a.x0, x0);
  const int iy = std::min(a.y0 + a.h, y0 + h) - std::max(a.y0, y0);
  return ix > 0 && iy > 0 ? ix * iy : 0;
}

Rgb mean_color(Canvas& c, int x0, int y0, int w, int h) {
  Rgb m;
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 6; ++i) {
      const float* p = c.at(x0 + (2 * i + 1) * w / 12, y0 + (2 * j + 1) * h / 12);
      m.r += p[0];
      m.g += p[1];
      m.b += p[2];
    }
  }
  return {m.r / 36.f, m.g / 36.f, m.b / 36.f};
}

// Colour difference that counts brightness twice: what makes an item stand out.
float contrast(const Rgb& a, const Rgb& b) {
  const float dl = std::fabs(luma(a) - luma(b));
  const float dc = std::sqrt((a.r - b.r) * (a.r - b.r) + (a.g - b.g) * (a.g - b.g) + (a.b - b.b) * (a.b - b.b));
  return std::max(dl * 2.f, dc);
}

// A tint that stands out from the background under the item and from the items it overlaps: random colours until
// one is different enough from all of them (the best of 16 otherwise).
Rgb pick_tint(SplitMix64& rng, const std::vector<Rgb>& around) {
  Rgb best;
  float best_score = -1.f;
  for (int i = 0; i < 16; ++i) {
    const Rgb c = random_color(rng);
    float score = 1e9f;
    for (const Rgb& a : around) score = std::min(score, contrast(c, a));
    if (score > best_score) best_score = score, best = c;
    if (score >= 140.f) break;
  }
  return best;
}

}  // namespace

std::array<std::vector<int>, kFmnistClasses> fmnist_index_by_class(const FmnistSplit& ds) {
  std::array<std::vector<int>, kFmnistClasses> out;
  for (int i = 0; i < ds.count; ++i) out[ds.labels[static_cast<size_t>(i)]].push_back(i);
  return out;
}

DetScene render_fmnist_det_scene(const FmnistSplit& ds, const std::array<std::vector<int>, kFmnistClasses>& by_class,
                                 uint64_t seed, int split_tag, int index, const FmnistDetOptions& opt) {
  // Each scene has its own stream, derived from (seed, split, index) alone: scenes can be made in any order.
  SplitMix64 mixer(seed);
  const uint64_t s1 = mixer.next() ^ (static_cast<uint64_t>(split_tag) * 0xD1B54A32D192ED03ull);
  SplitMix64 mixer2(s1);
  SplitMix64 rng(mixer2.next() ^ (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull));

  Canvas canvas(opt.width, opt.height);
  draw_background(canvas, rng);

  const int want = rng.range(opt.min_items, opt.max_items);
  const float log_ratio = std::log(opt.max_side / opt.min_side);
  std::vector<Item> items;
  for (int k = 0; k < want; ++k) {
    Item it;
    do {
      it.cls = rng.range(0, kFmnistClasses - 1);
    } while (by_class[static_cast<size_t>(it.cls)].empty());
    const auto& pool = by_class[static_cast<size_t>(it.cls)];
    it.glyph = pool[static_cast<size_t>(rng.range(0, static_cast<int>(pool.size()) - 1))];
    const float side = opt.min_side * std::exp(rng.uniform() * log_ratio);
    const float aspect = std::sqrt(rng.uniform(0.8f, 1.25f));
    it.w = std::min(opt.width, std::max(8, static_cast<int>(side * aspect + 0.5f)));
    it.h = std::min(opt.height, std::max(8, static_cast<int>(side / aspect + 0.5f)));
    const bool flip = rng.chance(0.5f);
    // Place it where it does not bury much of an earlier item (the visibility check below has the last word).
    bool placed = false;
    for (int attempt = 0; attempt < 12 && !placed; ++attempt) {
      it.x0 = rng.range(0, opt.width - it.w);
      it.y0 = rng.range(0, opt.height - it.h);
      placed = true;
      for (const Item& prev : items) {
        if (overlap(prev, it.x0, it.y0, it.w, it.h) * 2 > prev.w * prev.h) placed = false;
      }
    }
    if (!placed) continue;
    std::vector<Rgb> around = {mean_color(canvas, it.x0, it.y0, it.w, it.h)};
    for (const Item& prev : items) {
      if (overlap(prev, it.x0, it.y0, it.w, it.h) > 0) around.push_back(prev.tint);
    }
    it.tint = pick_tint(rng, around);
    it.ink = glyph_ink(ds, it.glyph, it.w, it.h, flip);
    it.alpha.resize(it.ink.size());
    for (size_t p = 0; p < it.ink.size(); ++p) it.alpha[p] = std::min(1.f, it.ink[p] * kAlphaGain);
    for (float a : it.alpha) it.own += a > opt.alpha_threshold;
    if (it.own < 24) continue;
    items.push_back(std::move(it));
  }

  // Visibility, top item first: weight of item i in the final blend = alpha_i * prod over items above (1 - alpha_j).
  // An item that shows too little is dropped before drawing, so no unlabelled item is ever drawn.
  std::vector<float> transmit(static_cast<size_t>(opt.width) * opt.height, 1.f);
  std::vector<char> keep(items.size(), 0);
  std::vector<DetObject> objects(items.size());
  for (size_t r = items.size(); r-- > 0;) {
    const Item& it = items[r];
    int visible = 0, bx0 = opt.width, by0 = opt.height, bx1 = -1, by1 = -1;
    for (int y = 0; y < it.h; ++y) {
      for (int x = 0; x < it.w; ++x) {
        const float a = it.alpha[static_cast<size_t>(y) * it.w + x];
        const size_t p = static_cast<size_t>(it.y0 + y) * opt.width + it.x0 + x;
        if (a * transmit[p] > opt.alpha_threshold) {
          ++visible;
          bx0 = std::min(bx0, it.x0 + x), bx1 = std::max(bx1, it.x0 + x);
          by0 = std::min(by0, it.y0 + y), by1 = std::max(by1, it.y0 + y);
        }
      }
    }
    if (visible < 16 || visible < opt.min_visible * it.own || bx1 - bx0 < 2 || by1 - by0 < 2) continue;
    keep[r] = 1;
    for (int y = 0; y < it.h; ++y) {
      for (int x = 0; x < it.w; ++x) {
        transmit[static_cast<size_t>(it.y0 + y) * opt.width + it.x0 + x] *= 1.f - it.alpha[static_cast<size_t>(y) * it.w + x];
      }
    }
    DetObject& o = objects[r];
    o.category_id = it.cls + 1;
    o.x = bx0, o.y = by0, o.w = bx1 - bx0 + 1, o.h = by1 - by0 + 1;
    o.area = visible;
    o.source_index = it.glyph;
  }

  DetScene scene;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!keep[i]) continue;
    const Item& it = items[i];
    for (int y = 0; y < it.h; ++y) {
      for (int x = 0; x < it.w; ++x) {
        const size_t p = static_cast<size_t>(y) * it.w + x;
        if (it.alpha[p] > 0.f) canvas.blend(it.x0 + x, it.y0 + y, shade(it.tint, it.ink[p]), it.alpha[p]);
      }
    }
    scene.objects.push_back(objects[i]);
  }

  // Sensor-like noise, then to bytes.
  const float noise = rng.chance(0.7f) ? rng.uniform(1.f, 12.f) : 0.f;
  scene.image = Image(opt.width, opt.height);
  const size_t npx = static_cast<size_t>(opt.width) * opt.height;
  for (size_t i = 0; i < npx; ++i) {
    const uint64_t bits = noise > 0.f ? rng.next() : 0;
    for (int k = 0; k < 3; ++k) {
      float v = canvas.px[i * 3 + k];
      if (noise > 0.f) v += (static_cast<float>((bits >> (k * 21)) & 0x1FFFFF) * (1.f / 2097152.f) - 0.5f) * 2.f * noise;
      scene.image.data[i * 3 + k] = static_cast<uint8_t>(clampf(v, 0.f, 255.f) + 0.5f);
    }
  }
  return scene;
}

void FmnistDetStats::add(const std::vector<DetObject>& objs) {
  const int n = static_cast<int>(objs.size());
  if (images == 0) {
    min_per_image = max_per_image = n;
  } else {
    min_per_image = std::min(min_per_image, n);
    max_per_image = std::max(max_per_image, n);
  }
  ++images;
  objects += n;
  ++per_image_hist[static_cast<size_t>(std::min(n, 12))];
  auto range_of = [](int64_t area) { return area < 32 * 32 ? 0 : (area <= 96 * 96 ? 1 : 2); };
  for (const DetObject& o : objs) {
    ++by_area[static_cast<size_t>(range_of(o.area))];
    ++by_box_area[static_cast<size_t>(range_of(int64_t{o.w} * o.h))];
    if (o.category_id >= 1 && o.category_id <= kFmnistClasses) ++per_class[static_cast<size_t>(o.category_id - 1)];
  }
}

std::string format_stats(const FmnistDetStats& s) {
  std::ostringstream o;
  char buf[160];
  auto pct = [&](int v) { return s.objects ? 100.0 * v / s.objects : 0.0; };
  std::snprintf(buf, sizeof(buf), "images: %d, objects: %d, objects per image: mean %.2f, min %d, max %d\n\n",
                s.images, s.objects, s.images ? static_cast<double>(s.objects) / s.images : 0.0, s.min_per_image,
                s.max_per_image);
  o << buf;
  o << "| objects in an image | images |\n| ---: | ---: |\n";
  for (int k = 0; k <= 12; ++k) {
    if (s.per_image_hist[static_cast<size_t>(k)] == 0) continue;
    o << "| " << k << " | " << s.per_image_hist[static_cast<size_t>(k)] << " |\n";
  }
  o << "\n| COCO area range | by `area` (visible pixels) | by box area (w*h) |\n| --- | ---: | ---: |\n";
  const char* names[3] = {"small (< 32^2)", "medium", "large (> 96^2)"};
  for (int r = 0; r < 3; ++r) {
    std::snprintf(buf, sizeof(buf), "| %s | %d (%.1f%%) | %d (%.1f%%) |\n", names[r], s.by_area[r], pct(s.by_area[r]),
                  s.by_box_area[r], pct(s.by_box_area[r]));
    o << buf;
  }
  o << "\n| id | class | objects |\n| ---: | --- | ---: |\n";
  for (int c = 0; c < kFmnistClasses; ++c) {
    std::snprintf(buf, sizeof(buf), "| %d | %s | %d (%.1f%%) |\n", c + 1, fmnist_class_names()[c], s.per_class[c],
                  pct(s.per_class[c]));
    o << buf;
  }
  return o.str();
}

Status generate_fmnist_det(const FmnistSplit& ds, const FmnistDetGenerateOptions& opt, FmnistDetStats* stats) {
  if (opt.split != "train" && opt.split != "val") {
    return invalid("unknown FMNIST-Det split '" + opt.split + "'; use train or val");
  }
  if (opt.count < 1 || opt.count > 10000000) return invalid("--count must be in 1..10000000");
  if (opt.out_dir.empty()) return invalid("no output folder given (--out DIR)");
  const FmnistDetOptions& so = opt.scene;
  if (so.width < 64 || so.height < 64 || so.width > 4096 || so.height > 4096 || so.min_items < 1 ||
      so.max_items < so.min_items || !(so.min_side >= 8.f) || !(so.max_side >= so.min_side)) {
    return invalid("bad FMNIST-Det scene options");
  }
  if (ds.count == 0) return invalid("the Fashion-MNIST split is empty");
  const auto by_class = fmnist_index_by_class(ds);
  const std::string img_dir = opt.out_dir + "/images", ann_dir = opt.out_dir + "/annotations";
  const std::string lbl_dir = opt.out_dir + "/labels";
  QD_RETURN_IF_ERROR(make_dirs(img_dir));
  QD_RETURN_IF_ERROR(make_dirs(ann_dir));
  if (opt.yolo_labels) QD_RETURN_IF_ERROR(make_dirs(lbl_dir));
  const int split_tag = opt.split == "train" ? 0 : 1;
  auto stem = [](int id) {
    char b[32];
    std::snprintf(b, sizeof(b), "%06d", id);
    return std::string(b);
  };

  std::vector<std::vector<DetObject>> objects(static_cast<size_t>(opt.count));
  QD_RETURN_IF_ERROR(parallel_for(opt.count, opt.threads, opt.progress ? "fmnist-det " + opt.split : "",
                                  [&](int i) -> Status {
    DetScene scene = render_fmnist_det_scene(ds, by_class, opt.seed, split_tag, i, so);
    const std::string bytes = QD_TRY(encode_jpeg(scene.image, so.jpeg_quality));
    QD_RETURN_IF_ERROR(write_file_atomic(img_dir + "/" + stem(i + 1) + ".jpg", bytes));
    if (opt.yolo_labels) {
      std::string txt;
      char line[128];
      for (const DetObject& o : scene.objects) {
        std::snprintf(line, sizeof(line), "%d %.6f %.6f %.6f %.6f\n", o.category_id - 1,
                      (o.x + o.w * 0.5) / so.width, (o.y + o.h * 0.5) / so.height,
                      static_cast<double>(o.w) / so.width, static_cast<double>(o.h) / so.height);
        txt += line;
      }
      QD_RETURN_IF_ERROR(write_file_atomic(lbl_dir + "/" + stem(i + 1) + ".txt", txt));
    }
    objects[static_cast<size_t>(i)] = std::move(scene.objects);
    return Status::ok();
  }));

  nlohmann::ordered_json j;
  j["info"] = {{"description", "FMNIST-Det " + opt.split + ": synthetic detection scenes of Fashion-MNIST items"},
               {"version", "1.0"},
               {"generator", "qdeploy dataset fmnist-det --split " + opt.split + " --count " +
                                 std::to_string(opt.count) + " --seed " + std::to_string(opt.seed)}};
  j["licenses"] = nlohmann::ordered_json::array();
  auto& images = j["images"] = nlohmann::ordered_json::array();
  auto& anns = j["annotations"] = nlohmann::ordered_json::array();
  int ann_id = 0;
  FmnistDetStats st;
  for (int i = 0; i < opt.count; ++i) {
    const int image_id = i + 1;
    images.push_back({{"id", image_id}, {"file_name", stem(image_id) + ".jpg"}, {"width", so.width},
                      {"height", so.height}});
    for (const DetObject& o : objects[static_cast<size_t>(i)]) {
      anns.push_back({{"id", ++ann_id}, {"image_id", image_id}, {"category_id", o.category_id},
                      {"bbox", {o.x, o.y, o.w, o.h}}, {"area", o.area}, {"iscrowd", 0}});
    }
    st.add(objects[static_cast<size_t>(i)]);
  }
  auto& cats = j["categories"] = nlohmann::ordered_json::array();
  for (int c = 0; c < kFmnistClasses; ++c) {
    cats.push_back({{"id", c + 1}, {"name", fmnist_class_names()[static_cast<size_t>(c)]},
                    {"supercategory", "fashion"}});
  }
  QD_RETURN_IF_ERROR(write_file_atomic(ann_dir + "/instances_" + opt.split + ".json", j.dump() + "\n"));
  if (stats) *stats = st;
  return Status::ok();
}

}  // namespace qd
