// [cpu] A cache folder holding what an attacker or a broken disk leaves under an entry's name,
// writers' temporaries, and the tools' exit codes on hostile settings.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "cache/kernel_cache.hpp"
#include "jit/spec_set.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::cache;
using Catch::Contains;

namespace {

using test::run;

const std::string& kWarmup = test::kWarmupTool;
using test::kCacheTool;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A spec set of six small sm_90 kernels, written into `folder`; returns its path.
std::string six_spec_config(const std::string& folder) {
  const std::string path = folder + "/set.json";
  write_text(path, R"({"specs": [{"module": "token_quant", "hidden": [2048, 4096, 6144], "dtype": ["bf16", "f16"]}],
                       "targets": ["sm_90"]})");
  return path;
}

using test::read_file;
using test::write_file;

struct PlantedEntry {
  std::string path;
  CompiledKernel kernel;
};

// A folder with one real entry.
PlantedEntry one_entry(const std::string& dir) {
  CacheOptions o;
  o.dir = dir;
  PlantedEntry e;
  e.kernel = KernelCache(o).get(jit::KernelSpec::parse("token_quant/h2048/bf16/sm_90"));
  const auto entries = DiskCache(dir).list();
  REQUIRE(entries.size() == 1);
  e.path = entries[0].path;
  return e;
}

// Replaces the entry at `path` with a hostile thing of the given kind.
void plant(const std::string& kind, const std::string& path) {
  const auto good = read_file(path);
  REQUIRE(::unlink(path.c_str()) == 0);
  if (kind == "overflowing sizes") {
    // name size 0xFFFFFFFF and a payload size chosen so that 128 + N + J + P wraps to the file size.
    auto bad = good;
    std::uint32_t name = 0xFFFFFFFFu, metadata = 0;
    std::memcpy(&metadata, bad.data() + 16, 4);
    const std::uint64_t payload = std::uint64_t(bad.size()) - 128 - name - metadata;  // wraps on purpose
    std::memcpy(bad.data() + 12, &name, 4);
    std::memcpy(bad.data() + 24, &payload, 8);
    write_file(path, bad);
  } else if (kind == "FIFO") {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  } else if (kind == "link to /dev/zero") {
    REQUIRE(::symlink("/dev/zero", path.c_str()) == 0);
  } else if (kind == "2 GiB file") {
    // A valid header, then a sparse 2 GiB: judged from the header alone, never read.
    write_file(path, std::vector<std::uint8_t>(good.begin(), good.begin() + 128));
    REQUIRE(::truncate(path.c_str(), 2ll << 30) == 0);
  } else if (kind == "folder with contents") {
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    REQUIRE(::mkdir((path + "/inner").c_str(), 0700) == 0);
    write_text(path + "/inner/file", "x");
  } else if (kind == "socket") {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    ::close(fd);
  }
}

const char* expected_problem(const std::string& kind) {
  if (kind == "overflowing sizes") return "header sizes out of bounds";
  if (kind == "FIFO") return "a FIFO, not a file";
  if (kind == "link to /dev/zero") return "a symbolic link, not a file";
  if (kind == "2 GiB file") return "the header says";
  if (kind == "folder with contents") return "a folder, not a file";
  return "a socket, not a file";
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void age(const std::string& path, std::int64_t seconds) {
  const timespec old = {::time(nullptr) - seconds, 0};
  const timespec times[2] = {old, old};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace

TEST_CASE("hostile files named like an entry are refused by name, removed by the next writer and by verify --fix",
          "[cpu][cache][hostile][nvrtc]") {
  const std::string kind = GENERATE(as<std::string>{}, "overflowing sizes", "FIFO", "link to /dev/zero", "2 GiB file",
                                    "folder with contents", "socket");
  CAPTURE(kind);
  const std::string dir = test::fresh_dir();
  const PlantedEntry planted = one_entry(dir);
  const std::string path = planted.path;
  const auto good = read_file(path);
  plant(kind, path);

  const auto checked = DiskCache(dir).check(path.substr(dir.size() + 1));
  CHECK(checked.outcome == ReadOutcome::bad);
  CHECK_THAT(checked.problem, Contains(expected_problem(kind)));

  SECTION("ls, stat and verify name it and agree; verify --fix removes it and says so truthfully") {
    const auto ls = run(kCacheTool + " --cache-dir " + dir + " ls");
    CHECK(ls.status == 0);
    CHECK_THAT(ls.output, Contains("BAD: ") && Contains(expected_problem(kind)));
    const auto stat = run(kCacheTool + " --cache-dir " + dir + " stat");
    CHECK(stat.status == 0);
    CHECK_THAT(stat.output, Contains("entries: 1 (1 bad"));
    const auto verify = run(kCacheTool + " --cache-dir " + dir + " verify");
    CHECK(verify.status == 1);
    CHECK_THAT(verify.output, Contains("0 good, 1 bad"));
    const auto fix = run(kCacheTool + " --cache-dir " + dir + " verify --fix");
    CHECK(fix.status == 0);
    CHECK_THAT(fix.output, Contains("(removed)") && Contains("1 removed, 0 left"));
    CHECK_FALSE(exists(path));
  }
  SECTION("the next process that needs the kernel removes it, compiles and publishes a good entry") {
    CacheOptions o;
    o.dir = dir;
    KernelCache c(o);
    CHECK(c.get(jit::KernelSpec::parse("token_quant/h2048/bf16/sm_90")).origin == CodeOrigin::compiled);
    CHECK(c.disk()->stats().rejected == 1);
    CHECK(c.disk()->writable());  // a bad entry never turns the disk off
    CHECK(read_file(path) == good);
  }
  SECTION("a writer publishes over it (a folder is removed first)") {
    DiskCache disk(dir);
    CHECK(disk.store(planted.kernel.key, planted.kernel.entry));
    CHECK(disk.writable());
    CHECK(read_file(path) == good);
  }
}

TEST_CASE("writers' temporaries: counted, capped, stale ones removed, all removed by clear",
          "[cpu][cache][hostile][nvrtc]") {
  const std::string dir = test::fresh_dir();
  const std::string entry = one_entry(dir).path;
  const std::uint64_t entry_bytes = read_file(entry).size();
  const std::string stale = dir + "/.tmp-dead-writer.123.abc", fresh = dir + "/.tmp-live-writer.456.def";
  write_text(stale, std::string(1000, 's'));
  write_text(fresh, std::string(500, 'f'));
  age(stale, 2 * kStaleTemporaryAgeSeconds);
  DiskCache disk(dir);
  CHECK(disk.temporaries().size() == 2);
  CHECK(disk.total_bytes() == entry_bytes + 1500);

  const auto stat = run(kCacheTool + " --cache-dir " + dir + " stat");
  CHECK_THAT(stat.output, Contains("temporaries: 2") && Contains("1 older than"));

  SECTION("verify --fix removes the stale one and leaves the live writer's") {
    const auto fix = run(kCacheTool + " --cache-dir " + dir + " verify --fix");
    CHECK(fix.status == 0);
    CHECK_THAT(fix.output, Contains("1 stale temporaries removed"));
    CHECK_FALSE(exists(stale));
    CHECK(exists(fresh));
  }
  SECTION("warmup removes the stale one first") {
    write_text(dir + "/set.json",
               R"({"specs": [{"module": "token_quant", "hidden": 2048, "dtype": "bf16"}], "targets": ["sm_90"]})");
    const auto w = run(kWarmup + " --quiet --config " + dir + "/set.json --cache-dir " + dir);
    CHECK(w.status == 0);
    CHECK_THAT(w.output, Contains("removed 1 temporaries"));
    CHECK_FALSE(exists(stale));
    CHECK(exists(fresh));
  }
  SECTION("the size cap counts them, and prune removes stale ones before entries") {
    CHECK(disk.prune(entry_bytes + 500) == 0);  // the stale temporary went, the entry stays
    CHECK_FALSE(exists(stale));
    CHECK(exists(entry));
    CHECK(disk.prune(entry_bytes) == 1);  // the live temporary counts and stays: the entry goes
    CHECK_FALSE(exists(entry));
    CHECK(exists(fresh));
  }
  SECTION("clear removes every entry and every temporary") {
    const auto clear = run(kCacheTool + " --cache-dir " + dir + " clear");
    CHECK(clear.status == 0);
    CHECK_THAT(clear.output, Contains("removed 1 entries and 2 temporaries"));
    CHECK(disk.temporaries().empty());
    CHECK(disk.list().empty());
  }
}

TEST_CASE("warmup exits 0 only when every spec is stored, 1 saying why when not, 2 on bad settings",
          "[cpu][cache][hostile][warmup][nvrtc]") {
  const std::string dir = test::fresh_dir(), scratch = test::fresh_dir();
  const std::string config = six_spec_config(scratch);
  const std::string warmup = kWarmup + " --quiet --config " + config + " --cache-dir ";

  SECTION("everything stored: 0, and the report says stored") {
    const auto w = run(warmup + dir + " --json " + scratch + "/report.json");
    CHECK(w.status == 0);
    const auto report = nlohmann::json::parse(read_file(scratch + "/report.json"));
    CHECK(report.at("stored") == 6);
    CHECK(DiskCache(dir).list().size() == 6);
  }
  SECTION("a size cap of 0 or 1 byte stores nothing: 1, with the reason") {
    const std::string cap = GENERATE(as<std::string>{}, "0", "1");
    const auto w = run("ARFUSE_CACHE_MAX_BYTES=" + cap + " " + warmup + dir);
    CHECK(w.status == 1);
    CHECK_THAT(w.output, Contains("NOT STORED: 6 specs not stored") && Contains("size cap is " + cap + " bytes"));
  }
  SECTION("--memory-only compiles, stores nothing, and says so") {
    const auto w = run(warmup + dir + " --memory-only");
    CHECK(w.status == 0);
    CHECK_THAT(w.output, Contains("(memory only)"));
    CHECK(DiskCache(dir).list().empty());
  }
  SECTION("bad settings are usage or configuration errors: 2") {
    write_text(scratch + "/hidden.json",
               R"({"specs": [{"module": "token_quant", "hidden": 4294967304}], "targets": ["sm_90"]})");
    write_text(scratch + "/world.json",
               R"({"specs": [{"module": "fused_ar", "hidden": 2048, "world": 4294967300}], "targets": ["sm_90"]})");
    write_text(scratch + "/big.json", std::string((4 << 20) + 1, ' '));
    REQUIRE(::chmod(scratch.c_str(), 0777) == 0);
    const std::vector<std::pair<std::string, std::string>> cases{
        {"ARFUSE_CACHE_MAX_BYTES=lots " + warmup + dir, "ARFUSE_CACHE_MAX_BYTES='lots' is not a byte count"},
        {kWarmup + " --config " + dir + " --cache-dir " + dir, "is not used: it is a folder, not a regular file"},
        {kWarmup + " --config " + scratch + "/missing.json --cache-dir " + dir, "is not used: cannot open it"},
        {kWarmup + " --config /dev/zero --cache-dir " + dir,
         "/dev/zero is not used: it is a device, not a regular file"},
        {kWarmup + " --config " + scratch + "/big.json --cache-dir " + dir, "holds 4194305 bytes; at most 4194304"},
        {kCacheTool + " --cache-dir '' stat", "--cache-dir has an empty value"},
        {kWarmup + " --cache-dir '' --target sm_90", "--cache-dir has an empty value"},
        {kWarmup + " --config " + scratch + "/hidden.json --cache-dir " + dir, "4294967304 is out of range for hidden"},
        {kWarmup + " --config " + scratch + "/world.json --cache-dir " + dir, "4294967300 is out of range for world"},
        {warmup + dir + " --jobs 99999999999999999999", "--jobs must be a whole number from 1 to 1024"},
        {warmup + scratch, "writable by group or others"},
        {kCacheTool + " --cache-dir " + scratch + " stat", "writable by group or others"},
    };
    for (const auto& [command, message] : cases) {
      CAPTURE(command);
      const auto w = run(command);
      CHECK(w.status == 2);
      CHECK_THAT(w.output, Contains(message));
      CHECK_THAT(w.output, !Contains("in memory only"));  // the untrusted folder: one story, not two
    }
  }
  SECTION("a target the compiler cannot build for is one error for the whole target") {
    // sm_71: NVRTC refuses it; gfx1999: no hiprtc or clang knows it.
    const std::string refused = GENERATE(as<std::string>{}, "sm_71", "gfx1999");
    CAPTURE(refused);
    const auto r = run(kWarmup + " --quiet --target " + refused + " --cache-dir " + dir);
    CHECK(r.status == 1);
    const auto specs = jit::default_specs({Target::parse("sm_90")}).size();  // the same count for every target
    CHECK_THAT(r.output, Contains("FAILED target " + refused + " (" + std::to_string(specs) + " specs not attempted)"));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') < 12);  // not one line per spec
  }
}

TEST_CASE("warmup on a full disk exits 1, saying how many and why, the warning once per run",
          "[cpu][cache][hostile][warmup][nvrtc][root]") {
  const std::string dir = test::fresh_dir(), scratch = test::fresh_dir();
  const std::string config = six_spec_config(scratch);
  // A private mount namespace with a 40 KiB tmpfs over the cache folder: the disk fills up.
  const auto w = run("unshare -m sh -c 'mount -t tmpfs -o size=40k,mode=700 tmpfs " + dir + " && " + kWarmup +
                     " --quiet --config " + config + " --cache-dir " + dir + "'");
  CHECK(w.status == 1);
  CHECK_THAT(w.output, Contains("specs not stored: cannot write an entry: No space left on device"));
  CHECK(test::count_of(w.output, "arfuse: warning: kernel cache") == 1);
}

TEST_CASE("a file size limit (ulimit -f) fails the stores it stops, names the cause, and leaves no temporary",
          "[cpu][cache][hostile][warmup][nvrtc]") {
  const std::string dir = test::fresh_dir(), scratch = test::fresh_dir();
  const std::string config = six_spec_config(scratch);
  // dash counts ulimit -f in 512-byte blocks: 2 KiB, less than any entry.
  const auto w =
      run("sh -c 'ulimit -f 4; exec " + kWarmup + " --quiet --config " + config + " --cache-dir " + dir + "'");
  CHECK(w.status == 1);
  CHECK_THAT(w.output, Contains("specs not stored") && Contains("File too large"));
  CHECK_THAT(w.output, !Contains("ended abnormally"));
  CHECK(DiskCache(dir).temporaries().empty());
}

TEST_CASE("a compiler that leaves a sleeping child: the warm-up ends at once, and so does the child",
          "[cpu][hostile][warmup]") {
  const std::string dir = test::fresh_dir(), scratch = test::fresh_dir();
  const std::string clang = scratch + "/clang", pids = scratch + "/pids", config = scratch + "/set.json";
  // Lists one AMD target, refuses every compile, and each time leaves a child holding its output
  // (and, were they inherited, the warm-up's own pipes) for ten minutes.
  write_text(clang, "#!/bin/sh\nsleep 600 &\necho $! >> " + pids +
                        "\ncase \"$*\" in *--print-supported-cpus*) echo 'clang version 99'; echo '    gfx1250'; "
                        "exit 0;; esac\nexit 1\n");
  REQUIRE(::chmod(clang.c_str(), 0755) == 0);
  write_text(config, R"({"specs": [{"module": "token_quant", "hidden": [2048], "dtype": ["bf16"]}]})");
  const auto start = std::chrono::steady_clock::now();
  const auto w = run("ARFUSE_AMD_CLANG=" + clang + " timeout 300 " + kWarmup + " --quiet --target gfx1250 --config " +
                     config + " --cache-dir " + dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(w.status == 1);  // the spec failed; not 124, timeout's code
  CHECK_THAT(w.output, Contains("FAILED"));
  CHECK(seconds < 60);
  std::ifstream listed(pids);
  int children = 0;
  for (long pid; listed >> pid; ++children) {
    CAPTURE(pid);
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    const bool gone = !std::getline(stat, line) || line.substr(line.rfind(')') + 2, 1) == "Z";
    CHECK(gone);
  }
  CHECK(children >= 2);  // the target listing and the compile
}

TEST_CASE("every ARFUSE_ variable is checked before a tool starts: spaces, signs and unknown words are exit 2",
          "[cpu][hostile]") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"ARFUSE_CACHE_MAX_BYTES=' -1'", "ARFUSE_CACHE_MAX_BYTES=' -1' starts or ends with a space"},
      {"ARFUSE_CACHE_MAX_BYTES=-1", "ARFUSE_CACHE_MAX_BYTES='-1' is not a byte count"},
      {"ARFUSE_CACHE_MAX_BYTES=+5", "ARFUSE_CACHE_MAX_BYTES='+5' is not a byte count"},
      {"ARFUSE_CACHE_MAX_BYTES=18446744073709551616", "larger than 2^64 - 1"},
      {"ARFUSE_COMPILE=maybe", "ARFUSE_COMPILE='maybe' is neither on nor off"},
      {"ARFUSE_COMPILE='on '", "ARFUSE_COMPILE='on ' starts or ends with a space"},
      {"ARFUSE_TEMPLATE_DIR=/nonexistent", "ARFUSE_TEMPLATE_DIR='/nonexistent' cannot be used"},
      {"ARFUSE_TEMPLATE_DIR=/etc/hostname", "is not a folder"},
      {"ARFUSE_TUNING=/nonexistent", "ARFUSE_TUNING='/nonexistent' cannot be used"},
      {"ARFUSE_LOG=garbage", "ARFUSE_LOG='garbage' is not one of warn, debug"},
      {"ARFUSE_DEVICE_BACKEND=gpu", "ARFUSE_DEVICE_BACKEND='gpu' is not one of auto, cuda, hip"},
      {"ARFUSE_AMD_CLANG=/nonexistent/clang", "ARFUSE_AMD_CLANG='/nonexistent/clang' is not an executable file"},
  };
  for (const auto& [setting, message] : cases) {
    for (const std::string& tool : {kWarmup + " --dry-run --target sm_90", kCacheTool + " stat"}) {
      CAPTURE(setting, tool);
      const auto r = run(setting + " " + tool);
      CHECK(r.status == 2);
      CHECK_THAT(r.output, Contains("configuration error: ") && Contains(message));
    }
  }
  // What is allowed still works, and an unset variable is its default.
  const auto ok =
      run("ARFUSE_LOG=warn ARFUSE_COMPILE=on ARFUSE_CACHE_MAX_BYTES=0 " + kWarmup + " --dry-run --target sm_90");
  CHECK(ok.status == 0);
}

TEST_CASE("stat, ls and verify agree on swapped entries (each a good entry under the other's name)",
          "[cpu][cache][hostile][nvrtc]") {
  const std::string dir = test::fresh_dir();
  CacheOptions o;
  o.dir = dir;
  KernelCache c(o);
  c.get(jit::KernelSpec::parse("token_quant/h2048/bf16/sm_90"));
  c.get(jit::KernelSpec::parse("token_quant/h4096/bf16/sm_90"));
  const auto entries = DiskCache(dir).list();
  REQUIRE(entries.size() == 2);
  const auto a = read_file(entries[0].path), b = read_file(entries[1].path);
  write_file(entries[0].path, b);
  write_file(entries[1].path, a);
  const auto stat = run(kCacheTool + " --cache-dir " + dir + " stat");
  CHECK_THAT(stat.output, Contains("entries: 2 (2 bad"));
  const auto ls = run(kCacheTool + " --cache-dir " + dir + " ls");
  CHECK(test::count_of(ls.output, "BAD: key in the header does not match the file name") == 2);
  const auto verify = run(kCacheTool + " --cache-dir " + dir + " verify");
  CHECK(verify.status == 1);
  CHECK_THAT(verify.output, Contains("0 good, 2 bad"));
}

TEST_CASE("the cache tool on a folder that does not exist says so and creates nothing", "[cpu][cache]") {
  const std::string missing = test::fresh_dir() + "/not-there";
  for (const char* command : {"stat", "ls", "verify", "verify --fix", "prune --max-bytes 0", "clear"}) {
    CAPTURE(command);
    const auto r = run(kCacheTool + " --cache-dir " + missing + " " + command);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Contains("cache folder " + missing + " does not exist: nothing is cached there"));
    CHECK_FALSE(std::filesystem::exists(missing));
  }
  // Usage errors still come first.
  CHECK(run(kCacheTool + " --cache-dir " + missing + " prune --max-bytes x").status == 2);
  // code-diff against a missing folder would list every spec as one-sided: it is refused instead.
  const std::string present = test::fresh_dir();
  for (const std::string& args :
       {"--cache-dir " + missing + " code-diff " + present, "--cache-dir " + present + " code-diff " + missing}) {
    CAPTURE(args);
    const auto r = run(kCacheTool + " " + args);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Contains("code-diff: cache folder " + missing + " does not exist"));
    CHECK_FALSE(std::filesystem::exists(missing));
  }
}
