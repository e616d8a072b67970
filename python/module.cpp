// arfuse._arfuse: what the Python package needs from libarfuse: the version, arfuse's exceptions
// as Python exceptions carrying the C++ message, spec parsing, the mode names, the settings table,
// the cache's stat and verify (all without a GPU), and the group and epilogue calls
// (group_binding.cpp).
// Kernel warm-up runs the arfuse-warmup tool itself: python/arfuse/__init__.py.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"
#include "arfuse/version.hpp"

#include "base/trusted_folder.hpp"
#include "cache/disk_cache.hpp"
#include "cache/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"

#include "group_binding.hpp"

namespace nb = nanobind;
using namespace arfuse;

namespace {

// JSON text crosses as a string; python/arfuse/__init__.py turns it into dicts and lists.
std::string parse_spec(const std::string& text) {
  const auto spec = jit::KernelSpec::parse(text);
  spec.validate();
  return spec.json().dump();
}

std::string cache_stat(const std::string& given) {
  const std::string dir = given.empty() ? default_cache_dir() : given;
  if (cache::cache_folder_missing(dir)) {
    return nlohmann::json{{"dir", dir},
                          {"exists", false},
                          {"usable", false},
                          {"problem", "the folder does not exist (arfuse creates it when it first stores a kernel)"},
                          {"entries", 0},
                          {"bad", 0},
                          {"bytes", 0},
                          {"temporaries", 0},
                          {"temporary_bytes", 0},
                          {"stale_temporaries", 0}}
        .dump();
  }
  cache::DiskCache disk(dir);
  int entries = 0, bad = 0, stale = 0;
  std::uint64_t bytes = 0, temporary_bytes = 0;
  for (const auto& info : disk.list()) {
    ++entries, bytes += info.bytes;
    bad += disk.check(info.file_name).ok() ? 0 : 1;
  }
  const auto temporaries = disk.temporaries();
  for (const auto& t : temporaries) temporary_bytes += t.bytes, stale += cache::DiskCache::is_stale(t);
  return nlohmann::json{{"dir", disk.dir()},
                        {"exists", true},
                        {"usable", disk.readable()},
                        {"problem", disk.problem()},
                        {"entries", entries},
                        {"bad", bad},
                        {"bytes", bytes},
                        {"temporaries", temporaries.size()},
                        {"temporary_bytes", temporary_bytes},
                        {"stale_temporaries", stale}}
      .dump();
}

std::string cache_verify(const std::string& given) {
  const std::string dir = given.empty() ? default_cache_dir() : given;
  if (cache::cache_folder_missing(dir)) return "[]";
  cache::DiskCache disk(dir);
  nlohmann::json files = nlohmann::json::array();
  for (const auto& info : disk.list()) {
    const auto checked = disk.check(info.file_name);
    files.push_back({{"file", info.file_name},
                     {"ok", checked.ok()},
                     {"problem", checked.problem},
                     {"spec", checked.ok() ? cache::spec_of(checked.entry) : ""}});
  }
  return files.dump();
}

// The names each mode argument of the calls takes, in the C++ lists' order: the Python package's
// QUANT_MODES and the like are these, so the two cannot drift apart.
template <typename Value>
nlohmann::json names(const std::vector<Value>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (Value v : values) out.push_back(to_string(v));
  return out;
}

std::string modes() {
  std::vector<Quant> reading;
  for (Quant q : all_quants())
    if (reads_quant_scale(q)) reading.push_back(q);
  return nlohmann::json{{"quant", names(all_quants())},
                        {"reads_scale", names(reading)},
                        {"norm", names(all_norms())},
                        {"scale_format", names(all_scale_formats())},
                        {"scale_layout", names(all_scale_layouts())}}
      .dump();
}

// The rule of base/trusted_folder.hpp for the Python package (the PyTorch ops' library and its
// folder): an open descriptor of what `path` names, which the caller closes, or arfuse.Error
// saying which component breaks which rule.
int open_trusted_path(const std::string& path, const std::string& kind, bool create) {
  std::string why;
  if (kind == "private_folder") {
    TrustedFolder folder;
    if (!open_trusted_folder(path, create, folder, why)) throw Error(why);
    return folder.fd.release();
  }
  if (create) throw Error("open_trusted: only a private_folder is created");
  const Trusted trusted = kind == "folder"    ? Trusted::folder
                          : kind == "file"    ? Trusted::file
                          : kind == "program" ? Trusted::program
                                              : throw Error(fmt::format("open_trusted: no kind '{}'", kind));
  FileDescriptor fd;
  if (!open_trusted(path, trusted, fd, why)) throw Error(why);
  return fd.release();
}

std::string settings_table() {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& v : settings::all()) {
    rows.push_back({{"name", v.name},
                    {"type", v.type},
                    {"default", v.default_value},
                    {"meaning", v.meaning},
                    {"accepts", v.words != nullptr ? v.words : ""}});
  }
  return rows.dump();
}

}  // namespace

NB_MODULE(_arfuse, m) {
  m.doc() = "arfuse's C++ core: exceptions, spec parsing, settings, cache stat and verify, groups, epilogue";
  // Base first: nanobind tries the most recently registered translator first, so each
  // subclass is matched before arfuse.Error.
  auto error = nb::exception<Error>(m, "Error");
  nb::exception<ConfigError>(m, "ConfigError", error);
  nb::exception<UnsupportedTarget>(m, "UnsupportedTarget", error);
  nb::exception<Unavailable>(m, "Unavailable", error);
  nb::exception<CompileError>(m, "CompileError", error);
  nb::exception<DeviceError>(m, "DeviceError", error);
  auto peer_timeout = nb::exception<PeerTimeout>(m, "PeerTimeout", error);
  auto call_mismatch = nb::exception<CallMismatch>(m, "CallMismatch", error);
  python::bind_group(m, peer_timeout, call_mismatch);

  m.def("version", [] { return std::string(version()); });
  m.def("parse_spec", &parse_spec, nb::arg("text"), "The spec's fields as JSON; raises Error naming a bad field.");
  m.def("default_cache_dir", [] { return default_cache_dir(); });
  m.def("cache_stat", &cache_stat, nb::arg("dir") = "", "Counts entries, bad entries and temporaries (JSON).");
  m.def("cache_verify", &cache_verify, nb::arg("dir") = "", "Checks every entry (JSON list).");
  m.def("modes", &modes, "The names of every quant, norm, scale_format and scale_layout (JSON).");
  m.def("open_trusted", &open_trusted_path, nb::arg("path"), nb::arg("kind"), nb::arg("create") = false,
        "An open descriptor of `path` once it and every folder above it pass arfuse's rule for what it loads or "
        "runs (kind: private_folder, folder, file or program); raises Error naming the component at fault.");
  m.def("settings", &settings_table, "Every ARFUSE_* variable: name, type, default, meaning (JSON).");
  // Raises the exception that a C++ throw of `kind` becomes (tests of the mapping).
  m.def("_raise", [](const std::string& kind, const std::string& message) {
    if (kind == "ConfigError") throw ConfigError(message);
    if (kind == "Unavailable") throw Unavailable(message);
    if (kind == "PeerTimeout") throw PeerTimeout(message, 3);
    if (kind == "CallMismatch") throw CallMismatch(message, 0, 1);
    if (kind == "DeviceError") throw DeviceError(message, 700);
    throw Error(message);
  });
}
