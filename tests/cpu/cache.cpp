// [cpu] The persistent cache: keys, entries, verification, publishing under concurrency,
// untrusted and unwritable folders, eviction, the in-memory layer, and serving a process that
// has no compiler.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/dynamic_library.hpp"
#include "base/system.hpp"
#include "cache/cache_key.hpp"
#include "cache/kernel_cache.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::cache;
using Catch::Contains;

namespace {

jit::KernelSpec spec(const char* text) { return jit::KernelSpec::parse(text); }

using test::read_file;
using test::write_file;

CacheOptions options_for(const std::string& dir) {
  CacheOptions o;
  o.dir = dir;
  return o;
}

// Files in `dir` (not below it) whose name starts with ".tmp-": writes not yet renamed into place.
int count_temporaries(const std::string& dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(".tmp-", 0) == 0) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("the key changes with templates, options, target and compiler, and nothing else", "[cpu][cache]") {
  const std::string nvrtc = "nvrtc 13.0 V13.0.88";
  const auto key = [&](const jit::Source& s, const std::string& compiler) { return kernel_key(s, &compiler).full; };
  const jit::Source base = jit::render(spec("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90"));
  const Digest k = key(base, nvrtc);
  CHECK(key(jit::render(spec("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90")), nvrtc) == k);
  jit::Source changed = base;
  changed.templates[1].text += " ";
  CHECK(key(changed, nvrtc) != k);
  changed = base;
  changed.options.push_back("-lineinfo");
  CHECK(key(changed, nvrtc) != k);
  changed = base;
  std::swap(changed.options[1], changed.options[2]);  // order matters
  CHECK(key(changed, nvrtc) != k);
  CHECK(key(jit::render(spec("rmsnorm_quant/h6144/bf16/fp8/rms/sm_89")), nvrtc) != k);
  CHECK(key(base, "nvrtc 13.0 V13.0.76") != k);
  CHECK(key(jit::render(spec("rmsnorm_quant/h6144/bf16/fp8/gemma/sm_90")), nvrtc) != k);
}

TEST_CASE("one key names a kernel in memory, on disk and in its entry's description", "[cpu][cache]") {
  const jit::Source source = jit::render(spec("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90"));
  const std::string nvrtc = "nvrtc 13.0 V13.0.88";
  const KernelKey with = kernel_key(source, &nvrtc), without = kernel_key(source, nullptr);
  CHECK(with.source == without.source);
  CHECK(with.has_compiler);
  CHECK_FALSE(without.has_compiler);
  CHECK(with.file == entry_file_name(with.source, with.full));
  CHECK(with.file.rfind(without.file_prefix, 0) == 0);
  CHECK(entry_file_prefix(with.source) == with.file_prefix);
  CHECK(file_name_carries(with.file, with.full));
  CHECK_FALSE(file_name_carries(entry_file_name(with.source, with.source), with.full));
  std::string upper = with.file;
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  CHECK_FALSE(file_name_carries(upper, with.full));
  CHECK_FALSE(file_name_carries(with.file.substr(0, 40), with.full));
  CHECK(with.memory == to_hex(with.full));
  CHECK(without.memory == "any:" + to_hex(without.source));
  const auto metadata = nlohmann::json::parse(with.metadata);
  CHECK(metadata.at("spec") == "rmsnorm_quant/h6144/bf16/fp8/rms/sm_90");
  CHECK(metadata.at("compiler") == nvrtc);
  CHECK(metadata.at("templates").size() == source.templates.size());
}

TEST_CASE("the entry format is pinned by a golden file", "[cpu][cache]") {
  CacheEntry e;
  for (int i = 0; i < 32; ++i) e.key[size_t(i)] = std::uint8_t(i);
  e.lowered_name = "_Z6kernelv";
  e.metadata = R"({"spec":"token_quant/h8/bf16/sm_90"})";
  e.payload = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto bytes = serialize(e);
  const std::string golden = ARFUSE_SOURCE_DIR "/tests/golden/entry-v1.bin";
  if (std::getenv("ARFUSE_UPDATE_GOLDEN")) write_file(golden, bytes);
  CHECK(read_file(golden) == bytes);  // changed on purpose? bump kCacheFormatVersion
  CacheEntry back;
  std::string problem;
  REQUIRE(deserialize(bytes, back, problem));
  CHECK(back.payload == e.payload);
  CHECK(back.lowered_name == e.lowered_name);
}

TEST_CASE("miss, compile and publish, then disk hit from a new cache, then memory hit", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  const auto s = spec("token_quant/h2048/bf16/sm_90");
  {
    KernelCache c(options_for(dir));
    CHECK(c.get(s).origin == CodeOrigin::compiled);
    CHECK(c.get(s).origin == CodeOrigin::memory);
    CHECK(c.stats().compiled == 1);
  }
  KernelCache again(options_for(dir));
  const auto hit = again.get(s);
  CHECK(hit.origin == CodeOrigin::disk);
  CHECK(again.stats().compiled == 0);
  CHECK(count_temporaries(dir) == 0);
  struct stat st {};
  REQUIRE(stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("damaged entries are rejected, removed and rebuilt", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  const auto s = spec("token_quant/h2048/f16/sm_90");
  KernelCache(options_for(dir)).get(s);
  const auto entries = DiskCache(dir).list();
  REQUIRE(entries.size() == 1);
  const std::string path = entries[0].path;
  const auto good = read_file(path);
  const std::string damage =
      GENERATE(as<std::string>{}, "truncated", "bit flip in payload", "bit flip in name", "wrong magic", "empty");
  CAPTURE(damage);
  auto bad = good;
  if (damage == "truncated") bad.resize(bad.size() / 2);
  if (damage == "bit flip in payload") bad[bad.size() - 100] ^= 0x10;
  if (damage == "bit flip in name") bad[130] ^= 0x01;
  if (damage == "wrong magic") bad[0] = 'X';
  if (damage == "empty") bad.clear();
  write_file(path, bad);
  KernelCache c(options_for(dir));
  CHECK(c.get(s).origin == CodeOrigin::compiled);
  CHECK(c.disk()->stats().rejected == 1);
  CHECK(read_file(path) == good);  // rebuilt: compilation is deterministic
}

TEST_CASE("an entry renamed to another key is rejected", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  KernelCache(options_for(dir)).get(spec("token_quant/h2048/f16/sm_90"));
  const auto a = DiskCache(dir).list().at(0);
  KernelCache(options_for(dir)).get(spec("token_quant/h4096/f16/sm_90"));
  std::string other;
  for (const auto& e : DiskCache(dir).list())
    if (e.path != a.path) other = e.path;
  REQUIRE(std::rename(a.path.c_str(), other.c_str()) == 0);  // h2048 code under the h4096 name
  KernelCache c(options_for(dir));
  CHECK(c.get(spec("token_quant/h4096/f16/sm_90")).origin == CodeOrigin::compiled);
  CHECK(c.disk()->stats().rejected == 1);
}

TEST_CASE("four processes warming one empty folder at once all succeed, nothing torn", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  std::vector<jit::KernelSpec> specs;
  for (int h : {2048, 2880, 4096, 5120, 6144}) {
    for (const char* d : {"f16", "bf16"})
      specs.push_back(spec(("token_quant/h" + std::to_string(h) + "/" + d + "/sm_90").c_str()));
  }
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        KernelCache c(options_for(dir));
        for (size_t i = 0; i < specs.size(); ++i) c.get(specs[(i + size_t(p) * 3) % specs.size()]);
      } catch (...) {
        status = 1;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  DiskCache disk(dir);
  CHECK(disk.list().size() == specs.size());
  for (const auto& e : disk.list()) {
    const auto checked = disk.check(e.file_name);
    CHECK(checked.ok());
  }
  CHECK(count_temporaries(dir) == 0);
}

TEST_CASE("an untrusted folder is not used: memory only, with the reason", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  SECTION("writable by others") { REQUIRE(chmod(dir.c_str(), 0777) == 0); }
  SECTION("owned by another user") { REQUIRE(chown(dir.c_str(), 65534, 65534) == 0); }
  KernelCache c(options_for(dir));
  REQUIRE(c.disk() != nullptr);
  CHECK_FALSE(c.disk()->readable());
  CHECK_FALSE(c.disk()->problem().empty());
  CHECK(c.get(spec("token_quant/h2048/bf16/sm_90")).origin == CodeOrigin::compiled);
  CHECK(c.get(spec("token_quant/h2048/bf16/sm_90")).origin == CodeOrigin::memory);
  CHECK(DiskCache(dir).list().empty());
  chown(dir.c_str(), getuid(), getgid());
  chmod(dir.c_str(), 0700);
  CHECK(DiskCache(dir).list().empty());  // nothing was written there
}

TEST_CASE("a read-only or full disk: keep working from memory", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  ScopedSystemCalls restore;
  const std::string failure = GENERATE(as<std::string>{}, "read-only", "disk full", "rename fails");
  CAPTURE(failure);
  std::string reason;
  if (failure == "read-only") {
    reason = std::strerror(EROFS);
    system_calls().openat = [](int dir, const char* path, int flags, mode_t mode) -> int {
      if (flags & O_CREAT) return errno = EROFS, -1;
      return real_system_calls().openat(dir, path, flags, mode);
    };
  } else if (failure == "disk full") {
    reason = std::strerror(ENOSPC);
    system_calls().write = [](int, const void*, size_t) -> ssize_t { return errno = ENOSPC, -1; };
  } else {
    reason = std::strerror(EIO);
    system_calls().renameat = [](int, const char*, int, const char*) -> int { return errno = EIO, -1; };
  }
  KernelCache c(options_for(dir));
  CHECK(c.get(spec("token_quant/h2048/bf16/sm_90")).origin == CodeOrigin::compiled);
  CHECK_FALSE(c.disk()->writable());
  CHECK_THAT(c.disk()->problem(), Contains(reason));
  CHECK(c.get(spec("token_quant/h2048/bf16/sm_90")).origin == CodeOrigin::memory);
  CHECK(c.get(spec("token_quant/h4096/bf16/sm_90")).origin == CodeOrigin::compiled);
  CHECK(count_temporaries(dir) == 0);
  CHECK(DiskCache(dir).list().empty());
}

TEST_CASE("the size cap evicts the least recently used entries; a hit refreshes", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  std::vector<jit::KernelSpec> specs{spec("token_quant/h2048/bf16/sm_90"), spec("token_quant/h4096/bf16/sm_90"),
                                     spec("token_quant/h6144/bf16/sm_90")};
  std::uint64_t one = 0;
  {
    KernelCache c(options_for(dir));
    for (const auto& s : specs) {
      c.get(s);
      usleep(20000);  // distinct modification times
    }
    one = DiskCache(dir).list().at(0).bytes;
  }
  {
    KernelCache c(options_for(dir));
    CHECK(c.get(specs[0]).origin == CodeOrigin::disk);  // refreshes the oldest
  }
  DiskCache disk(dir);
  CHECK(disk.prune(disk.total_bytes() - 1) == 1);  // removes specs[1], now the least recent
  KernelCache c(options_for(dir));
  CHECK(c.get(specs[0]).origin == CodeOrigin::disk);
  CHECK(c.get(specs[2]).origin == CodeOrigin::disk);
  CHECK(c.get(specs[1]).origin == CodeOrigin::compiled);
  CacheOptions capped = options_for(test::fresh_dir());
  capped.max_bytes = one * 2 + one / 2;
  KernelCache small(capped);
  for (const auto& s : specs) small.get(s);
  CHECK(small.disk()->list().size() == 2);
  CHECK(small.disk()->stats().evictions == 1);
}

TEST_CASE("concurrent requests for one missing spec compile it once", "[cpu][cache][nvrtc]") {
  KernelCache c(options_for(test::fresh_dir()));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      try {
        c.get(spec("token_quant/h8192/bf16/sm_90"));
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(c.stats().compiled == 1);
  CHECK(c.stats().memory_hits == 7);
}

TEST_CASE("a warmed cache serves a process that has no compiler", "[cpu][cache][nvrtc]") {
  const std::string dir = test::fresh_dir();
  const auto s = spec("rmsnorm_quant/h2880/bf16/fp8/rms/sm_90");
  const auto compiled = KernelCache(options_for(dir)).get(s);
  CacheOptions no_compiler = options_for(dir);
  no_compiler.allow_compile = false;
  KernelCache c(no_compiler);
  const auto hit = c.get(s);
  CHECK(hit.origin == CodeOrigin::disk);
  CHECK(hit.entry.payload == compiled.entry.payload);
  CHECK(hit.entry.lowered_name == compiled.entry.lowered_name);
  REQUIRE_THROWS_WITH(c.get(spec("rmsnorm_quant/h2880/bf16/fp8/gemma/sm_90")),
                      Contains("not in the kernel cache") && Contains("compiling is disabled"));
  SECTION("also when the compiler library is missing") {
    ScopedSystemCalls restore;
    system_calls().dlopen = [](const char*, int) -> void* { return nullptr; };
    CHECK(KernelCache(no_compiler).get(s).origin == CodeOrigin::disk);
  }
}

TEST_CASE("a missing library or symbol is a clear error", "[cpu][jit]") {
  ScopedSystemCalls restore;
  system_calls().dlsym = [](void*, const char* name) -> void* {
    return std::string(name) == "amd_comgr_get_isa_count" ? nullptr : real_system_calls().dlsym(RTLD_DEFAULT, name);
  };
  system_calls().dlopen = [](const char*, int) -> void* { return nullptr; };
  REQUIRE_THROWS_WITH(DynamicLibrary("NVRTC", {"libnvrtc.so.13", "libnvrtc.so"}),
                      Contains("NVRTC is not available") && Contains("libnvrtc.so.13"));
  system_calls().dlopen = real_system_calls().dlopen;
  system_calls().dlsym = [](void*, const char*) -> void* { return nullptr; };
  DynamicLibrary libc("the C library", {"libc.so.6"});
  REQUIRE_THROWS_WITH(libc.symbol("malloc"), Contains("does not export malloc"));
}

TEST_CASE("compiled code is the same in every process (a cache can be shared and verified)", "[cpu][cache][nvrtc]") {
  const std::string a = test::fresh_dir(), b = test::fresh_dir();
  const auto s = spec("fused_ar/h2880/bf16/fp8/mirror/gemma/w4/s2/sm_90");
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      KernelCache(options_for(a)).get(s);
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  KernelCache(options_for(b)).get(s);
  const auto in_a = DiskCache(a).list(), in_b = DiskCache(b).list();
  REQUIRE(in_a.size() == 1);
  REQUIRE(in_b.size() == 1);
  CHECK(in_a[0].file_name == in_b[0].file_name);
  CHECK(read_file(in_a[0].path) == read_file(in_b[0].path));
}
