// Kernel selection's policy (plan/tactics.h) with a fake target: recorded choices, the nearest-batch rule, frozen
// plans that never time, the timing loop's pick and near ties, and the timing cache files.
#include <gtest/gtest.h>

#include <fstream>

#include "plan/tactics.h"
#include "test_util.h"

namespace qd {
namespace {

// A layer whose tactics have fixed times; "bad" fails to run; optional ones start with "opt".
struct FakeLayer final : TacticLayer {
  FakeLayer(std::string sig, int n, std::map<std::string, float> times) : sig(std::move(sig)), n(n), times(std::move(times)) {}
  std::string signature() const override { return sig; }
  std::string legacy_signature() const override { return legacy; }
  int batch() const override { return n; }
  std::vector<Tactic> tactics() const override {
    std::vector<Tactic> out;
    for (const auto& [name, ms] : times) out.push_back({name, name.rfind("opt", 0) == 0, name.rfind("opt", 0) != 0});
    return out;
  }
  bool apply(const std::string& name) override {
    if (!times.count(name)) return false;
    current = name;
    return true;
  }
  std::string sig, legacy, current;
  int n;
  std::map<std::string, float> times;
};

struct FakeTimer final : TacticTimer {
  Expected<float> time(TacticLayer& layer, const Tactic& t) override {
    auto& l = static_cast<FakeLayer&>(layer);
    ++timed[l.sig];
    if (t.name.find("bad") != std::string::npos) return internal("launch failed");
    l.current = t.name;
    return l.times.at(t.name);
  }
  Status refine(const std::map<std::string, std::vector<std::string>>& c, TacticChoices*) override {
    close = c;
    return Status::ok();
  }
  std::map<std::string, int> timed;
  std::map<std::string, std::vector<std::string>> close;
};

TEST(NearestBatchChoice, SameLayerNearestBatchLargerOnTie) {
  const TacticChoices c = {{"conv:n1:h8:k16", "a"}, {"conv:n4:h8:k16", "b"}, {"conv:n8:h8:k16", "c"},
                           {"conv:n6:h8:k32", "other_rest"}, {"gemm:n6:h8:k16", "other_kind"}};
  EXPECT_EQ(*nearest_batch_choice(c, "conv:n6:h8:k16"), "c");  // 4 and 8 tie at 2: the larger
  EXPECT_EQ(*nearest_batch_choice(c, "conv:n2:h8:k16"), "a");
  EXPECT_EQ(*nearest_batch_choice(c, "conv:n32:h8:k16"), "c");
  EXPECT_EQ(nearest_batch_choice(c, "conv:n2:h9:k16"), nullptr);
  EXPECT_EQ(nearest_batch_choice(c, "no batch field"), nullptr);
}

TEST(SelectTactics, TimesOncePerSignaturePicksFastestAndRecords) {
  FakeLayer a("conv:n1:x", 1, {{"t1", 3.f}, {"t2", 1.f}, {"t3", 2.f}});
  FakeLayer b = a;  // same signature: takes a's pick untimed
  FakeTimer timer;
  TacticChoices choices;
  const auto stats = select_tactics({&a, &b}, &choices, {}, &timer);
  ASSERT_TRUE(stats) << stats.status().to_string();
  EXPECT_EQ(stats->timed, 2);
  EXPECT_EQ(timer.timed["conv:n1:x"], 3);
  EXPECT_EQ(choices.at("conv:n1:x"), "t2");
  EXPECT_EQ(a.current, "t2");
  EXPECT_EQ(b.current, "t2");
}

TEST(SelectTactics, OptionalFailuresAreSkippedOthersFail) {
  FakeLayer a("conv:n1:x", 1, {{"opt_bad", 0.1f}, {"t1", 2.f}});
  FakeTimer timer;
  TacticChoices choices;
  ASSERT_TRUE(select_tactics({&a}, &choices, {}, &timer));
  EXPECT_EQ(choices.at("conv:n1:x"), "t1");
  FakeLayer b("conv:n1:y", 1, {{"bad", 0.1f}, {"t1", 2.f}});
  const auto st = select_tactics({&b}, &choices, {}, &timer);
  ASSERT_FALSE(st);
  EXPECT_NE(st.status().message().find("launch failed"), std::string::npos);
  FakeLayer c("conv:n1:z", 1, {{"opt_bad", 0.1f}});
  EXPECT_FALSE(select_tactics({&c}, &choices, {}, &timer));  // nothing could run
}

TEST(SelectTactics, NearTiesForRefinementByBatch) {
  // Batch 1: up to 4 (the pick and three) within 15%; optional tactics never.
  FakeLayer a("conv:n1:x", 1,
              {{"p", 1.f}, {"q", 1.05f}, {"r", 1.1f}, {"s", 1.14f}, {"t", 1.12f}, {"opt", 1.01f}, {"far", 1.3f}});
  FakeLayer b("conv:n8:x", 8, {{"p", 1.f}, {"q", 1.05f}, {"r", 1.09f}, {"s", 1.12f}});
  FakeTimer timer;
  TacticChoices choices;
  ASSERT_TRUE(select_tactics({&a, &b}, &choices, {}, &timer));
  EXPECT_EQ(timer.close.at("conv:n1:x"), (std::vector<std::string>{"p", "q", "r", "t"}));
  EXPECT_EQ(timer.close.at("conv:n8:x"), (std::vector<std::string>{"p", "q", "r"}));
}

TEST(SelectTactics, RecordedChoicesLegacyKeysAndStaleOnes) {
  FakeLayer a("conv:n1:x:y2", 1, {{"t1", 1.f}, {"t2", 2.f}});
  a.legacy = "conv:n1:x";
  FakeLayer stale("conv:n1:z", 1, {{"t1", 1.f}, {"t2", 2.f}});
  TacticChoices choices = {{"conv:n1:x", "t2"}, {"conv:n1:z", "gone_kernel"}};
  FakeTimer timer;
  const auto stats = select_tactics({&a, &stale}, &choices, {}, &timer);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->reused, 1);
  EXPECT_EQ(a.current, "t2");
  EXPECT_EQ(timer.timed.count("conv:n1:x:y2"), 0u);
  EXPECT_EQ(timer.timed["conv:n1:z"], 2);  // a kernel this build lacks: timed again
  EXPECT_EQ(choices.at("conv:n1:z"), "t1");
}

TEST(SelectTactics, ProfileShapesTakeTheNearestBatchUnlessTuning) {
  TacticChoices choices = {{"conv:n8:x", "t2"}};
  FakeLayer a("conv:n5:x", 5, {{"t1", 1.f}, {"t2", 2.f}});
  FakeTimer timer;
  TacticPolicy run_time;
  run_time.tune = false;
  run_time.profile = true;
  auto stats = select_tactics({&a}, &choices, run_time, &timer);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->nearest, 1);
  EXPECT_EQ(a.current, "t2");
  EXPECT_TRUE(timer.timed.empty());
  // Building (tune) or without a profile, the batch is timed.
  TacticPolicy build;
  build.profile = true;
  stats = select_tactics({&a}, &choices, build, &timer);
  EXPECT_EQ(stats->timed, 1);
  EXPECT_EQ(choices.at("conv:n5:x"), "t1");
}

TEST(SelectTactics, FrozenNeverTimes) {
  TacticChoices choices = {{"conv:n8:x", "t2"}};
  FakeLayer near("conv:n5:x", 5, {{"t1", 1.f}, {"t2", 2.f}});
  FakeLayer unknown("conv:n1:other", 1, {{"t3", 1.f}, {"t1", 0.5f}});
  TacticPolicy frozen;
  frozen.frozen = true;
  const auto stats = select_tactics({&near, &unknown}, &choices, frozen, nullptr);
  ASSERT_TRUE(stats) << stats.status().to_string();
  EXPECT_EQ(stats->nearest, 1);
  EXPECT_EQ(stats->defaulted, 1);
  EXPECT_EQ(stats->timed, 0);
  EXPECT_EQ(near.current, "t2");
  EXPECT_EQ(unknown.current, "t1");  // the first tactic (map order here), never timed
  EXPECT_EQ(choices.size(), 1u);     // nothing recorded
}

TEST(TimingCache, RoundTripAndForeignCachesIgnored) {
  const std::string dir = test::temp_dir("timing_cache");
  const std::string path = dir + "/cache.json";
  ASSERT_TRUE(write_timing_cache(path, "GPU A", "", {{"conv:n1:x", "t1"}}).is_ok());
  TacticChoices c;
  read_timing_cache(path, "GPU A", "", &c);
  EXPECT_EQ(c, (TacticChoices{{"conv:n1:x", "t1"}}));
  TacticChoices other;
  read_timing_cache(path, "GPU B", "", &other);  // another GPU model
  EXPECT_TRUE(other.empty());
  read_timing_cache(path, "GPU A", "staged_epilogue", &other);  // another kernel policy
  EXPECT_TRUE(other.empty());
  std::ofstream(dir + "/bad.json") << "{not json";
  read_timing_cache(dir + "/bad.json", "GPU A", "", &other);
  EXPECT_TRUE(other.empty());
  read_timing_cache(dir + "/missing.json", "GPU A", "", &other);
  EXPECT_TRUE(other.empty());
}

}  // namespace
}  // namespace qd
