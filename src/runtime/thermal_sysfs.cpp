// SysfsThermalSource (declared in thermal_source.h): Linux /sys/class/thermal. Everything read
// here comes from drivers of uneven quality, so every file may be missing, unreadable or
// nonsense; a bad value drops that zone or trip point, never the whole reading.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include "runtime/thermal_source.h"

namespace pllm {
namespace {

namespace fs = std::filesystem;

// Temperatures outside these are sensor error codes (-22, -273000) or values in the wrong unit.
constexpr float kMinZoneC = -40.0f;
constexpr float kMaxZoneC = 150.0f;
// A throttling trip below room temperature is a placeholder, not a limit.
constexpr float kMinTripC = 20.0f;
// Sysfs values are one short line; anything longer is not a value.
constexpr std::streamsize kMaxValueBytes = 64;

std::optional<std::string> read_small_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxValueBytes + 1, '\0');
  in.read(text.data(), kMaxValueBytes + 1);
  if (in.bad() || in.gcount() > kMaxValueBytes) return std::nullopt;
  text.resize(size_t(in.gcount()));
  return text;
}

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A millidegree file as °C, or nullopt when it is not one integer inside [min_c, kMaxZoneC].
std::optional<float> read_millidegrees(const fs::path& path, float min_c) {
  const auto text = read_small_file(path);
  if (!text) return std::nullopt;
  const std::string_view s = trim(*text);
  int64_t milli = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), milli);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  const float c = float(milli) / 1000.0f;
  if (c < min_c || c > kMaxZoneC) return std::nullopt;
  return c;
}

// N of "trip_point_<N>_temp", or nullopt for any other name.
std::optional<std::string> trip_index(std::string_view name) {
  constexpr std::string_view prefix = "trip_point_", suffix = "_temp";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return std::nullopt;
  const std::string_view n = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (!std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::string(n);
}

struct Zone {
  float temp_c = kUnknownThermal;
  float passive_c = kUnknownThermal;  // the lowest trip of each type
  float hot_c = kUnknownThermal;
  float critical_c = kUnknownThermal;
};

void keep_lowest(float& slot, float value) {
  if (std::isnan(slot) || value < slot) slot = value;
}

void read_trips(const fs::path& dir, Zone& zone) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto n = trip_index(it->path().filename().string());
    if (!n) continue;
    const auto temp = read_millidegrees(it->path(), kMinTripC);
    const auto type = read_small_file(dir / ("trip_point_" + *n + "_type"));
    if (!temp || !type) continue;
    const std::string_view t = trim(*type);
    if (t == "passive") keep_lowest(zone.passive_c, *temp);
    else if (t == "hot") keep_lowest(zone.hot_c, *temp);
    else if (t == "critical") keep_lowest(zone.critical_c, *temp);
    // "active" trips start fans; they say nothing about throttling.
  }
}

std::optional<Zone> read_zone(const fs::path& dir) {
  if (const auto mode = read_small_file(dir / "mode"); mode && trim(*mode) == "disabled") return std::nullopt;
  const auto temp = read_millidegrees(dir / "temp", kMinZoneC);
  if (!temp) return std::nullopt;
  Zone zone;
  zone.temp_c = *temp;
  read_trips(dir, zone);
  return zone;
}

bool is_zone_dir(std::string_view name) {
  constexpr std::string_view prefix = "thermal_zone";
  if (name.size() <= prefix.size() || !name.starts_with(prefix)) return false;
  return std::all_of(name.begin() + prefix.size(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int zone_level(const Zone& z, float headroom) {
  if (!std::isnan(z.critical_c) && z.temp_c >= z.critical_c) return kThermalShutdown;
  if (!std::isnan(z.hot_c) && z.temp_c >= z.hot_c) return kThermalCritical;
  return thermal_level_from_headroom(headroom);
}

// NaN-aware max: an unknown value never replaces a known one.
float max_known(float a, float b) { return std::isnan(a) ? b : (std::isnan(b) ? a : std::max(a, b)); }

}  // namespace

ThermalReading SysfsThermalSource::read(int64_t) {
  ThermalReading r;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_zone_dir(it->path().filename().string())) continue;
    const auto zone = read_zone(it->path());
    if (!zone) continue;
    const float severe_c = std::isnan(zone->passive_c) ? zone->hot_c : zone->passive_c;
    const float headroom = thermal_headroom(zone->temp_c, severe_c);
    r.temp_c = max_known(r.temp_c, zone->temp_c);
    r.headroom = max_known(r.headroom, headroom);
    r.level = std::max(r.level, zone_level(*zone, headroom));
    r.valid = true;
  }
  return r;
}

}  // namespace pllm
