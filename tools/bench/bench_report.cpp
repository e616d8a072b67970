#include "bench_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/bounded_json.hpp"

namespace arfuse::tools {
namespace {

double tbps(const Row& r) { return r.bytes / (r.t.median_us * 1e-6) / 1e12; }

std::string exactness(const Row& r) {
  if (!r.measured_exactness) return "n/a";
  return r.exact ? "bit-exact" : fmt::format("NO (max err {:.3g})", r.max_error);
}

// Which line of a chart a row belongs to.
std::string family(const Row& r) {
  if (r.kind.rfind("fused", 0) == 0) return "arfuse fused";
  if (r.kind.rfind("allreduce", 0) == 0) return "arfuse " + r.kind;
  if (r.kind == "rmsnorm_quant") return "arfuse rmsnorm_quant";
  return r.kind;
}

}  // namespace

void print_markdown(const Report& rep) {
  std::printf("\ndevice: %s; copy ceiling: %.2f TB/s (%s; 1 GiB, same run)\n\n", rep.device.c_str(), rep.ceiling / 1e12,
              rep.ceiling_source.empty() ? "16-byte copy kernel" : rep.ceiling_source.c_str());
  std::printf("buffers: %s\n\n", rep.buffers.c_str());
  if (rep.launch_floor_us > 0) {
    std::printf("launch floor: %.2f µs per call (an empty kernel, one block per SM, same graphs of 16 calls)\n\n",
                rep.launch_floor_us);
  }
  std::printf(
      "| kernel | W | shape | out | median µs | min-max µs | MB moved | TB/s | %% ceiling | floor µs | exact | "
      "regs/spill/smem/occupancy |\n");
  std::printf("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (const auto& r : rep.rows) {
    std::printf("| %s | %d | %dx%d | %s | %.2f | %.2f-%.2f | %.2f | %.2f | %.1f | %.2f | %s | %s |\n", r.kind.c_str(),
                r.world, r.shape.tokens, r.shape.hidden, r.out.c_str(), r.t.median_us, r.t.min_us, r.t.max_us,
                r.bytes / 1e6, tbps(r), 100.0 * tbps(r) * 1e12 / rep.ceiling, r.bytes / rep.ceiling * 1e6,
                exactness(r).c_str(), r.resources.c_str());
  }
}

nlohmann::json to_json(const Report& rep) {
  nlohmann::json j = {{"mode", rep.mode},
                      {"device", rep.device},
                      {"copy_ceiling_bytes_per_s", rep.ceiling},
                      {"copy_ceiling_source", rep.ceiling_source},
                      {"launch_floor_us", rep.launch_floor_us},
                      {"buffers", rep.buffers},
                      {"rows", nlohmann::json::array()}};
  for (const auto& r : rep.rows) {
    j["rows"].push_back({{"kernel", r.kind},
                         {"world", r.world},
                         {"tokens", r.shape.tokens},
                         {"hidden", r.shape.hidden},
                         {"out", r.out},
                         {"median_us", r.t.median_us},
                         {"min_us", r.t.min_us},
                         {"max_us", r.t.max_us},
                         {"bytes", r.bytes},
                         {"exact", r.measured_exactness ? nlohmann::json(r.exact) : nlohmann::json()},
                         {"max_error", r.max_error},
                         {"resources", r.resources}});
  }
  return j;
}

namespace {

Row row_from_json(const nlohmann::json& j) {
  Row r;
  r.kind = j.at("kernel"), r.world = j.value("world", 1);
  r.shape = {j.at("tokens").get<int>(), j.at("hidden").get<int>()};
  r.out = j.at("out"), r.t.median_us = j.at("median_us");
  r.t.min_us = j.value("min_us", r.t.median_us), r.t.max_us = j.value("max_us", r.t.median_us);
  r.bytes = j.value("bytes", 0.0);
  r.measured_exactness = j.contains("exact") && j["exact"].is_boolean();
  r.exact = r.measured_exactness && j["exact"].get<bool>();
  r.max_error = j.value("max_error", 0.0);
  r.resources = j.value("resources", "");
  return r;
}

}  // namespace

Report report_from_json(const nlohmann::json& j, const std::string& origin) {
  try {
    Report rep;
    rep.mode = j.at("mode"), rep.device = j.at("device"), rep.ceiling = j.at("copy_ceiling_bytes_per_s");
    rep.launch_floor_us = j.value("launch_floor_us", 0.0);
    rep.ceiling_source = j.value("copy_ceiling_source", std::string());
    rep.buffers = j.value("buffers", std::string("rotating"));
    for (const auto& r : j.at("rows")) rep.rows.push_back(row_from_json(r));
    return rep;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not an arfuse-bench report: {}", origin, e.what()));
  }
}

nlohmann::json read_json(const std::string& path, const std::string& what) {
  std::string text, why;
  if (!read_config_file(path, text, why)) throw Error(fmt::format("{}: {}", what, why));
  nlohmann::json j;
  if (!parse_json(text, j, why)) throw Error(fmt::format("{}: not JSON: {}", what, why));
  return j;
}

Report read_report(const std::string& path) { return report_from_json(read_json(path, path), path); }

std::vector<Row> peer_rows_from_json(const nlohmann::json& j, const std::string& origin) {
  try {
    std::vector<Row> rows;
    for (const auto& r : j.at("rows")) rows.push_back(row_from_json(r));
    return rows;
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        fmt::format("{} is not a peer-measurement file (tools/bench/torch_bench.py --json): {}", origin, e.what()));
  }
}

void write_svg(const Report& rep, const std::string& path) {
  // Panels keyed by (hidden, out, world); in each, one line per family plus the floor.
  std::map<std::tuple<int, std::string, int>, std::map<std::string, std::vector<std::pair<int, double>>>> panels;
  for (const auto& r : rep.rows) {
    auto& lines = panels[{r.shape.hidden, r.out, r.world}];
    lines[family(r)].push_back({r.shape.tokens, r.t.median_us});
    if (family(r) == "arfuse fused" || family(r) == "arfuse rmsnorm_quant" ||
        family(r).rfind("arfuse allreduce", 0) == 0) {
      auto& floor = lines["floor (bytes / copy ceiling)"];
      if (std::none_of(floor.begin(), floor.end(), [&](auto& p) { return p.first == r.shape.tokens; })) {
        floor.push_back({r.shape.tokens, r.bytes / rep.ceiling * 1e6});
      }
    }
  }
  if (panels.empty()) throw Error("no rows to chart");
  const int pw = 460, ph = 300, cols = 2, margin = 56;
  const int rows_n = int((panels.size() + cols - 1) / cols);
  const int width = cols * (pw + margin) + margin, height = rows_n * (ph + margin + 40) + 70;
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='{}' y='24' font-size='16'>arfuse-bench {}: latency per call against tokens (log-log), {}, copy ceiling "
      "{:.2f} TB/s</text>\n",
      width, height, margin, rep.mode, rep.device, rep.ceiling / 1e12);
  int index = 0;
  for (const auto& [key, lines] : panels) {
    const auto& [hidden, out, world] = key;
    const int x0 = margin + (index % cols) * (pw + margin), y0 = 60 + (index / cols) * (ph + margin + 40);
    ++index;
    double tmin = 1e30, tmax = 0, umin = 1e30, umax = 0;
    for (const auto& [name, pts] : lines) {
      for (const auto& [t, us] : pts)
        tmin = std::min(tmin, double(t)), tmax = std::max(tmax, double(t)), umin = std::min(umin, us),
        umax = std::max(umax, us);
    }
    const double lt0 = std::log10(tmin) - 0.05, lt1 = std::log10(std::max(tmax, tmin * 2)) + 0.05;
    const double lu0 = std::floor(std::log10(umin)), lu1 = std::ceil(std::log10(umax) + 1e-9);
    auto X = [&](double t) { return x0 + (std::log10(t) - lt0) / (lt1 - lt0) * pw; };
    auto Y = [&](double us) { return y0 + ph - (std::log10(us) - lu0) / (lu1 - lu0) * ph; };
    svg += fmt::format("<text x='{}' y='{}' font-size='13'>hidden {}, {} out{}</text>\n", x0, y0 - 8, hidden, out,
                       world > 1 ? fmt::format(", W = {}", world) : "");
    svg += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='none' stroke='#999'/>\n", x0, y0, pw, ph);
    for (double d = lu0; d <= lu1 + 1e-9; d += 1) {
      for (int m : {1, 2, 5}) {
        const double us = std::pow(10.0, d) * m;
        if (std::log10(us) > lu1 + 1e-9) break;
        svg += fmt::format(
            "<line x1='{}' x2='{}' y1='{:.1f}' y2='{:.1f}' stroke='#eee'/><text x='{}' y='{:.1f}' "
            "text-anchor='end'>{:g}</text>\n",
            x0, x0 + pw, Y(us), Y(us), x0 - 4, Y(us) + 4, us);
      }
    }
    std::vector<int> ticks;
    for (const auto& [name, pts] : lines)
      for (const auto& p : pts) ticks.push_back(p.first);
    std::sort(ticks.begin(), ticks.end());
    ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
    for (int t : ticks) {
      svg += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", X(t), y0 + ph + 16, t);
    }
    svg += fmt::format("<text x='{}' y='{}' text-anchor='middle'>tokens</text>\n", x0 + pw / 2, y0 + ph + 32);
    svg += fmt::format("<text x='{}' y='{}' transform='rotate(-90 {} {})' text-anchor='middle'>µs per call</text>\n",
                       x0 - 40, y0 + ph / 2, x0 - 40, y0 + ph / 2);
    int li = 0;
    for (auto [name, pts] : lines) {
      std::sort(pts.begin(), pts.end());
      const bool floor = name.rfind("floor", 0) == 0;
      const std::string color = floor ? "#000" : colors[li % 7];
      std::string points;
      for (const auto& [t, us] : pts) points += fmt::format("{:.1f},{:.1f} ", X(t), Y(us));
      svg += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='2'{}/>\n", points, color,
                         floor ? " stroke-dasharray='5,4'" : "");
      for (const auto& [t, us] : pts)
        svg += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'/>\n", X(t), Y(us), color);
      svg += fmt::format(
          "<line x1='{}' x2='{}' y1='{}' y2='{}' stroke='{}' stroke-width='2'{}/><text x='{}' y='{}'>{}</text>\n",
          x0 + 10, x0 + 30, y0 + 14 + 16 * li, y0 + 14 + 16 * li, color, floor ? " stroke-dasharray='5,4'" : "",
          x0 + 36, y0 + 18 + 16 * li, name);
      ++li;
    }
  }
  svg += "</svg>\n";
  std::ofstream file(path);
  if (!(file << svg)) throw Error(fmt::format("cannot write {}", path));
}

}  // namespace arfuse::tools
