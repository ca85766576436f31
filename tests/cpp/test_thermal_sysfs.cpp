// SysfsThermalSource against fake /sys/class/thermal trees in a temporary directory (never the
// real /sys): good zones, missing and garbage files, trip points of every kind.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "runtime/thermal_source.h"

namespace pllm {
namespace {

namespace fs = std::filesystem;

// Android's normalisation, written out independently: 1.0 at severe, 0.0 at 30 °C below.
float android_headroom(float temp_c, float severe_c) { return (temp_c - (severe_c - 30.0f)) / 30.0f; }

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("pllm_thermal_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  // A zone with a temp file (unless temp is null) and trip points (millidegree text, type).
  fs::path zone(int n, const char* temp, const std::vector<std::pair<std::string, std::string>>& trips = {}) {
    const fs::path dir = root_ / ("thermal_zone" + std::to_string(n));
    fs::create_directories(dir);
    write(dir / "type", "test-zone\n");
    if (temp) write(dir / "temp", temp);
    for (size_t i = 0; i < trips.size(); ++i) {
      write(dir / ("trip_point_" + std::to_string(i) + "_temp"), trips[i].first);
      write(dir / ("trip_point_" + std::to_string(i) + "_type"), trips[i].second);
    }
    return dir;
  }
  ThermalReading read() { return SysfsThermalSource(root_.string()).read(0); }

  fs::path root_;
};

TEST_F(FakeSysfs, MissingOrEmptyRootIsInvalid) {
  EXPECT_FALSE(SysfsThermalSource((root_ / "does_not_exist").string()).read(0).valid);
  EXPECT_FALSE(read().valid);
}

TEST_F(FakeSysfs, OneZoneRelativeToItsPassiveTrip) {
  zone(0, "46000\n", {{"50000\n", "passive\n"}, {"100000\n", "critical\n"}});
  ThermalReading r = read();
  ASSERT_TRUE(r.valid);
  EXPECT_FLOAT_EQ(r.temp_c, 46.0f);
  EXPECT_FLOAT_EQ(r.headroom, android_headroom(46, 50));
  EXPECT_EQ(r.level, kThermalModerate);  // 4 °C below the passive trip
}

TEST_F(FakeSysfs, LowestPassiveTripIsTheReference) {
  zone(0, "58000", {{"90000", "passive"}, {"60000", "passive"}});
  ThermalReading r = read();
  EXPECT_FLOAT_EQ(r.headroom, android_headroom(58, 60));
  EXPECT_EQ(r.level, kThermalModerate);
}

TEST_F(FakeSysfs, ZoneNearestItsLimitDecidesNotTheHottest) {
  zone(0, "70000", {{"95000", "passive"}});  // hot in absolute terms, far from its limit
  zone(1, "44000", {{"45000", "passive"}});  // a battery 1 °C below its limit
  ThermalReading r = read();
  EXPECT_FLOAT_EQ(r.temp_c, 70.0f);
  EXPECT_FLOAT_EQ(r.headroom, android_headroom(44, 45));
  EXPECT_EQ(r.level, kThermalModerate);
}

TEST_F(FakeSysfs, HotTripWithoutPassiveIsTheReference) {
  zone(0, "81000", {{"85000", "hot"}, {"70000", "active"}});  // active trips run fans: ignored
  ThermalReading r = read();
  EXPECT_FLOAT_EQ(r.headroom, android_headroom(81, 85));
  EXPECT_EQ(r.level, kThermalModerate);
}

TEST_F(FakeSysfs, HotAndCriticalTripsRaiseTheLevel) {
  zone(0, "86000", {{"80000", "passive"}, {"85000", "hot"}, {"120000", "critical"}});
  EXPECT_EQ(read().level, kThermalCritical);  // the headroom alone says severe
  zone(1, "121000", {{"80000", "passive"}, {"120000", "critical"}});
  EXPECT_EQ(read().level, kThermalShutdown);
}

TEST_F(FakeSysfs, ZoneWithoutTripsGivesTemperatureOnly) {
  zone(0, "60000");
  ThermalReading r = read();
  ASSERT_TRUE(r.valid);
  EXPECT_FLOAT_EQ(r.temp_c, 60.0f);
  EXPECT_TRUE(std::isnan(r.headroom));
  EXPECT_EQ(r.level, kThermalNone);
}

TEST_F(FakeSysfs, ColdButRealTemperatureIsValid) {
  zone(0, "-5000", {{"45000", "passive"}});
  ThermalReading r = read();
  ASSERT_TRUE(r.valid);
  EXPECT_FLOAT_EQ(r.temp_c, -5.0f);
  EXPECT_FLOAT_EQ(r.headroom, 0.0f);
}

TEST_F(FakeSysfs, GarbageZonesAreSkipped) {
  const char* garbage[] = {"abc", "", "\n", "42000abc", "4.2e4", "99999999999999999999999", "9999999",
                           "-300000", "0x10000", "+"};
  int n = 0;
  for (const char* g : garbage) zone(n++, g, {{"50000", "passive"}});
  zone(n++, nullptr, {{"50000", "passive"}});                 // no temp file at all
  fs::create_directories(root_ / ("thermal_zone" + std::to_string(n++)) / "temp");  // a directory
  const fs::path dangling = root_ / ("thermal_zone" + std::to_string(n++));
  fs::create_directories(dangling);
  fs::create_symlink(root_ / "nowhere", dangling / "temp");       // unreadable
  zone(n++, std::string(1000, '1').c_str());                      // far too long for a value
  EXPECT_FALSE(read().valid);

  zone(n++, "40000\n", {{"50000", "passive"}});
  ThermalReading r = read();
  ASSERT_TRUE(r.valid);
  EXPECT_FLOAT_EQ(r.temp_c, 40.0f);
  EXPECT_FLOAT_EQ(r.headroom, android_headroom(40, 50));
}

TEST_F(FakeSysfs, BadTripPointsAreIgnored) {
  // Unparseable, a room-temperature placeholder, a missing type, and an unknown type: none of
  // them is a limit, so the only usable trip (hot, 90 °C) becomes the reference.
  const fs::path dir = zone(0, "82000", {{"abc", "passive"}, {"0", "passive"}, {"60000", "mystery"},
                                         {"90000", "hot"}});
  write(dir / "trip_point_7_temp", "55000");  // no trip_point_7_type
  write(dir / "trip_point_x_temp", "55000");  // not a trip point name
  ThermalReading r = read();
  ASSERT_TRUE(r.valid);
  EXPECT_FLOAT_EQ(r.headroom, android_headroom(82, 90));
  EXPECT_EQ(r.level, kThermalLight);
}

TEST_F(FakeSysfs, DisabledZonesAndOtherEntriesAreSkipped) {
  const fs::path off = zone(0, "99000", {{"50000", "passive"}});
  write(off / "mode", "disabled\n");
  write(root_ / "cooling_device0" / "temp", "99000");
  write(root_ / "thermal_zoneX" / "temp", "99000");
  EXPECT_FALSE(read().valid);
  const fs::path on = zone(1, "30000", {{"50000", "passive"}});
  write(on / "mode", "enabled\n");
  ThermalReading r = read();
  ASSERT_TRUE(r.valid);
  EXPECT_FLOAT_EQ(r.temp_c, 30.0f);
}

TEST_F(FakeSysfs, ReadsTheTreeAsItIsNow) {
  const fs::path dir = zone(0, "35000", {{"50000", "passive"}});
  EXPECT_EQ(read().level, kThermalNone);
  write(dir / "temp", "51000");
  EXPECT_EQ(read().level, kThermalSevere);
}

}  // namespace
}  // namespace pllm
