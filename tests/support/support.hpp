// Shared helpers for the tests: random tensors in raw bits, poison, comparisons that report
// the first mismatch, and a device available check for [gpu] tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "jit/kernel_spec.hpp"
#include "reference/model.hpp"

namespace arfuse::test {

using reference::Bits16;

// Values of roughly unit scale with a spread of magnitudes (and signs), rounded to dtype.
inline Bits16 random_tensor(std::mt19937& rng, std::size_t n, DType dtype, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  Bits16 out(n);
  for (auto& v : out) v = reference::narrow(normal(rng), dtype);
  return out;
}

// Sets (or with nullptr unsets) an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

inline std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// How many times `word` occurs in `text` (overlapping occurrences counted).
inline int count_of(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// The folders fresh_dir made, removed with everything in them when the test process that made
// them exits; a forked child that exits leaves them to that process.
class MadeFolders {
 public:
  void add(const std::string& path) { paths_.push_back(path); }
  ~MadeFolders() {
    if (getpid() != owner_) return;
    for (const auto& path : paths_) {
      std::error_code ignored;  // a test may have left a folder unreadable; nothing to do then
      std::filesystem::remove_all(path, ignored);
    }
  }

 private:
  pid_t owner_ = getpid();
  std::vector<std::string> paths_;
};

struct CommandResult {
  int status = -1;
  std::string output;
};

// Runs a shell command line, stdout and stderr together.
inline CommandResult run(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The tools the tests run, from this build.
inline const std::string kWarmupTool = std::string(ARFUSE_BINARY_DIR) + "/tools/arfuse-warmup";
inline const std::string kCacheTool = std::string(ARFUSE_BINARY_DIR) + "/tools/arfuse-cache";

// A new empty folder under /tmp named after `prefix`, removed when the test process exits.
inline std::string fresh_dir(const std::string& prefix = "arfuse-test") {
  static MadeFolders made;
  std::string pattern = "/tmp/" + prefix + "-XXXXXX";
  REQUIRE(mkdtemp(pattern.data()) != nullptr);
  made.add(pattern);
  return pattern;
}

// Every byte of a host output buffer set to the poison the tests fill device outputs with, so an
// element the kernel never wrote cannot match the reference by chance.
inline constexpr std::uint8_t kPoisonByte = 0xff;
template <typename T>
std::vector<T> poisoned(std::size_t n) {
  std::vector<T> v(n);
  if (n > 0) std::memset(v.data(), kPoisonByte, n * sizeof(T));  // an empty vector's data() may be null
  return v;
}

// `rows` rows of `width` elements (packed) laid out `stride` elements apart, the gaps poisoned: a
// kernel that reads a gap, or writes one, shows.
template <typename T>
std::vector<T> spread_rows(const std::vector<T>& packed, int rows, int width, int stride) {
  REQUIRE(stride >= width);
  REQUIRE(packed.size() == std::size_t(rows) * std::size_t(width));
  auto strided = poisoned<T>(std::size_t(rows) * std::size_t(stride));
  for (int r = 0; r < rows; ++r) {
    std::memcpy(&strided[std::size_t(r) * stride], &packed[std::size_t(r) * width], std::size_t(width) * sizeof(T));
  }
  return strided;
}

// The first byte (counted from the start of the tensor) past a row's `width` elements that is
// not what belongs there: zeros in columns [width, zeros_to) (a padded output), the poison in
// [zeros_to, stride) (nothing written); -1 when every gap is as it should be.
template <typename T>
long first_gap_error(const std::vector<T>& strided, int rows, int width, int stride, int zeros_to) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(strided.data());
  for (int r = 0; r < rows; ++r) {
    for (std::size_t b = std::size_t(width) * sizeof(T); b < std::size_t(stride) * sizeof(T); ++b) {
      const std::size_t at = std::size_t(r) * std::size_t(stride) * sizeof(T) + b;
      const std::uint8_t want = b < std::size_t(zeros_to) * sizeof(T) ? 0 : kPoisonByte;
      if (bytes[at] != want) return long(at);
    }
  }
  return -1;
}

// The rows of a strided tensor, packed, after checking its gaps (first_gap_error); `what` names
// the tensor in a failure.
template <typename T>
std::vector<T> packed_rows(const std::vector<T>& strided, int rows, int width, int stride, int zeros_to,
                           const std::string& what) {
  REQUIRE(zeros_to >= width);
  REQUIRE(stride >= zeros_to);
  REQUIRE(strided.size() >= std::size_t(rows) * std::size_t(stride));
  const long bad = first_gap_error(strided, rows, width, stride, zeros_to);
  if (bad >= 0) {
    const long row_bytes = long(stride) * long(sizeof(T)), column = bad % row_bytes;
    FAIL(what << ": row " << bad / row_bytes << " byte " << column << " (past the row's " << width * sizeof(T)
              << ") is " << int(reinterpret_cast<const std::uint8_t*>(strided.data())[bad]) << ", "
              << (column < long(zeros_to) * long(sizeof(T)) ? "not the padding's 0" : "written outside every row"));
  }
  std::vector<T> packed(std::size_t(rows) * std::size_t(width));
  for (int r = 0; r < rows; ++r) {
    std::memcpy(&packed[std::size_t(r) * width], &strided[std::size_t(r) * stride], std::size_t(width) * sizeof(T));
  }
  return packed;
}

inline std::mt19937 fresh_rng() {
  static std::random_device device;
  const unsigned seed = device();
  UNSCOPED_INFO("random seed " << seed);
  return std::mt19937(seed);
}

// Index of the first difference, or -1.
template <typename T>
long first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return long(i);
  }
  return -1;
}

template <typename T>
void require_bits_equal(const std::vector<T>& got, const std::vector<T>& expected, const std::string& what,
                        int hidden) {
  const long i = first_difference(got, expected);
  if (i >= 0) {
    FAIL(what << ": first mismatch at element " << i << " (row " << i / hidden << ", column " << i % hidden << "): got "
              << double(got[size_t(i)]) << " expected " << double(expected[size_t(i)]) << " of " << expected.size());
  }
  SUCCEED(what << " bit-identical (" << expected.size() << " elements)");
}

inline void require_scales_equal(const std::vector<float>& got, const std::vector<float>& expected,
                                 const std::string& what) {
  const long i = first_difference(got, expected);
  if (i >= 0) FAIL(what << ": scale of row " << i << " is " << got[size_t(i)] << ", expected " << expected[size_t(i)]);
  SUCCEED(what << " scales bit-identical");
}

// The epilogue's outputs as host bytes (what an emulated kernel wrote, or a device buffer read
// back by device_outputs.hpp), against the reference: `out` holds T elements (no quant) or
// FP8/E2M1 bytes, `scales` fp32 values or E8M0 bytes. `who` starts every failure message.
struct EpilogueBytes {
  const std::vector<std::uint16_t>& residual_out;
  const std::vector<std::uint8_t>& out;
  const std::vector<std::uint8_t>& scales;
  const std::vector<std::uint16_t>& mirror;
};

// A quant mode and whether the call also writes the mirror, as the tests' case tables name
// them: a Quant alone converts to the mode without the mirror; mirror(q) is it with the mirror.
struct QuantCase {
  Quant quant = Quant::none;
  bool mirror = false;
  QuantCase() = default;
  QuantCase(Quant q, bool m = false) : quant(q), mirror(m) {}  // NOLINT(google-explicit-constructor)
  bool operator==(const QuantCase& o) const { return quant == o.quant && mirror == o.mirror; }
  bool operator!=(const QuantCase& o) const { return !(*this == o); }
};
inline QuantCase mirror(Quant q) { return QuantCase{q, true}; }
inline EpilogueMode mode_of(const QuantCase& q, Norm norm, int group = 128, ScaleFormat format = ScaleFormat::f32,
                            ScaleLayout layout = ScaleLayout::row_major) {
  return EpilogueMode{q.quant, norm, group, format, layout, q.mirror};
}
inline std::string text(const QuantCase& q) { return std::string(to_string(q.quant)) + (q.mirror ? "+mirror" : ""); }

inline std::string fp4_or_fp8_name(Quant quant) { return packs_fp4(quant) ? to_string(quant) : "fp8"; }

// The scale value a test passes for the modes that read one: fp8_static's scale puts typical
// rows well inside the FP8 range and saturates the large ones; nvfp4's global scale is the usual
// 448 * 6 / amax for an amax of 8.
inline float test_quant_scale(Quant quant) {
  return quant == Quant::nvfp4 ? 448.0f * 6.0f / 8.0f : quant == Quant::fp8_static ? 0.0123f : 1.0f;
}

inline void require_epilogue_bytes(const EpilogueBytes& got, const reference::EpilogueOutputs& want,
                                   const reference::EpilogueConfig& config, int tokens, const std::string& who = "") {
  const int hidden = config.hidden;
  const std::size_t n = std::size_t(tokens) * std::size_t(hidden);
  const std::string at = who.empty() ? who : who + " ";
  require_bits_equal(got.residual_out, want.residual_out, at + "residual_out", hidden);
  if (config.mode.quant == Quant::none) {
    REQUIRE(got.out.size() == n * 2);
    std::vector<std::uint16_t> out(n);
    std::memcpy(out.data(), got.out.data(), n * 2);
    require_bits_equal(out, want.out, at + "out", hidden);
    return;
  }
  const bool fp4 = packs_fp4(config.mode.quant);
  require_bits_equal(got.out, want.q, at + fp4_or_fp8_name(config.mode.quant) + " out", fp4 ? hidden / 2 : hidden);
  if (!want.scale_bytes.empty()) {
    const std::size_t count = want.scale_bytes.size();
    REQUIRE(got.scales.size() >= count);
    require_bits_equal(std::vector<std::uint8_t>(got.scales.begin(), got.scales.begin() + long(count)),
                       want.scale_bytes, at + (config.mode.quant == Quant::nvfp4 ? "E4M3 scales" : "E8M0 scales"),
                       int(count / std::size_t(tokens)));
  } else {
    REQUIRE(got.scales.size() >= want.scales.size() * 4);
    std::vector<float> scales(want.scales.size());
    if (!scales.empty()) std::memcpy(scales.data(), got.scales.data(), scales.size() * 4);  // fp8_static: none
    require_scales_equal(scales, want.scales, at + "scales");
  }
  if (config.mode.mirror) require_bits_equal(got.mirror, want.mirror, at + "mirror", hidden);
}

}  // namespace arfuse::test
