// [cpu][hostile] Folders swapped under a running process, parents another user controls, and
// links on the way: the cache and the socket rendezvous resolve their folder once, check every
// component on its descriptor, and never touch anything outside what they checked; templates,
// tuning tables, compilers and libraries named by a path are held to the same rule.
#include "base/trusted_folder.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

#include "arfuse/bootstrap.hpp"
#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/dynamic_library.hpp"
#include "base/system.hpp"
#include "cache/disk_cache.hpp"
#include "cache/kernel_cache.hpp"
#include "jit/compiler.hpp"
#include "jit/render.hpp"
#include "jit/templates.hpp"
#include "jit/tuning.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::cache;
using Catch::Contains;
using std::chrono::milliseconds;

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

CacheEntry fake_entry(std::uint8_t seed) {
  CacheEntry e;
  e.key.fill(seed);
  e.lowered_name = "kernel";
  e.metadata = R"({"spec": "token_quant/h2048/bf16/sm_90"})";
  e.payload.assign(100, seed);
  return e;
}

Digest source_of(std::uint8_t seed) {
  Digest d{};
  d.fill(std::uint8_t(seed + 1));
  return d;
}

}  // namespace

TEST_CASE("a cache folder swapped after it was opened: the planted folder is neither read nor written",
          "[cpu][hostile][cache]") {
  const std::string base = test::fresh_dir();
  const std::string dir = base + "/cache", moved = base + "/moved";
  DiskCache disk(dir);
  REQUIRE(disk.readable());
  REQUIRE(disk.writable());
  // Another folder takes the name, holding a planted entry with valid checksums.
  REQUIRE(::rename(dir.c_str(), moved.c_str()) == 0);
  {
    DiskCache planter(dir);
    REQUIRE(planter.put(source_of(1), fake_entry(1)));
  }
  const std::string planted = entry_file_name(source_of(1), fake_entry(1).key);
  REQUIRE(exists(dir + "/" + planted));

  CHECK_FALSE(disk.get(source_of(1), fake_entry(1).key).has_value());  // not a hit
  CHECK(disk.list().empty());
  REQUIRE(disk.put(source_of(2), fake_entry(2)));
  const std::string written = entry_file_name(source_of(2), fake_entry(2).key);
  CHECK(exists(moved + "/" + written));  // into the folder that was checked
  CHECK_FALSE(exists(dir + "/" + written));
  CHECK(disk.clear() == 1);
  CHECK(exists(dir + "/" + planted));  // the planted folder is left as it was
}

TEST_CASE("the cache folder's parents: root or this user's, and writable by nobody else unless sticky",
          "[cpu][hostile][cache]") {
  const std::string base = test::fresh_dir();
  const std::string parent = base + "/parent", dir = parent + "/cache";
  REQUIRE(::mkdir(parent.c_str(), 0755) == 0);
  std::string why;
  SECTION("a parent writable by others is refused, a sticky one is accepted") {
    REQUIRE(::chmod(parent.c_str(), 0777) == 0);
    CHECK_FALSE(usable_cache_folder(dir, why));
    CHECK_THAT(why, Contains(parent + " is writable by group or others and not sticky (mode 777)"));
    CHECK_FALSE(exists(dir));  // nothing is created below a folder that is not trusted
    REQUIRE(::chmod(parent.c_str(), 01777) == 0);
    CHECK(usable_cache_folder(dir, why));
    CHECK(mode_of(dir) == 0700);
  }
  SECTION("a link on the way is followed when it is ours, refused when another user owns it") {
    REQUIRE(::mkdir((parent + "/real").c_str(), 0700) == 0);
    REQUIRE(::symlink("real", (parent + "/link").c_str()) == 0);
    DiskCache through(parent + "/link");
    REQUIRE(through.readable());
    REQUIRE(through.put(source_of(3), fake_entry(3)));
    CHECK(exists(parent + "/real/" + entry_file_name(source_of(3), fake_entry(3).key)));
  }
  SECTION("relative paths, dot-dot and repeated slashes resolve as the kernel would") {
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    TrustedFolder folder;
    REQUIRE(open_trusted_folder(parent + "//cache/../cache/./", false, folder, why));
    struct stat a {
    }, b{};
    REQUIRE(::fstat(folder.fd.get(), &a) == 0);
    REQUIRE(::stat(dir.c_str(), &b) == 0);
    CHECK((a.st_ino == b.st_ino && a.st_dev == b.st_dev));
    CHECK_FALSE(open_trusted_folder(parent + "/missing", false, folder, why));
    CHECK_THAT(why, Contains("cannot open " + parent + "/missing"));
    CHECK_FALSE(open_trusted_folder("", true, folder, why));
  }
}

TEST_CASE("a parent folder or a link on the way owned by another user is refused: they could swap the folder",
          "[cpu][hostile][cache][root]") {
  const std::string base = test::fresh_dir();
  const std::string parent = base + "/parent";
  REQUIRE(::mkdir(parent.c_str(), 0755) == 0);
  REQUIRE(::mkdir((parent + "/real").c_str(), 0700) == 0);
  REQUIRE(::symlink("real", (parent + "/link").c_str()) == 0);
  REQUIRE(::lchown((parent + "/link").c_str(), 65534, 65534) == 0);
  std::string why;
  CHECK_FALSE(usable_cache_folder(parent + "/link", why));
  CHECK_THAT(why, Contains("/link is a link owned by uid 65534"));
  REQUIRE(::chown(parent.c_str(), 65534, 65534) == 0);
  DiskCache disk(parent + "/cache");
  CHECK_FALSE(disk.readable());
  CHECK_THAT(disk.problem(), Contains(parent + " is owned by uid 65534, neither root nor this user"));
}

TEST_CASE("without HOME the default cache folder is this user's own under /tmp, never a shared one",
          "[cpu][hostile][cache]") {
  test::ScopedEnv no_dir("ARFUSE_CACHE_DIR", nullptr), no_xdg("XDG_CACHE_HOME", nullptr), no_home("HOME", nullptr);
  CHECK(default_cache_dir() == "/tmp/arfuse-" + std::to_string(::geteuid()));
}

namespace {

std::string swap_folder, swap_moved, swap_victim;

// Swaps the socket folder for a link to the victim's folder just before bind, as the race did.
int bind_after_swap(int fd, const sockaddr* address, socklen_t size) {
  if (::rename(swap_folder.c_str(), swap_moved.c_str()) != 0 ||
      ::symlink(swap_victim.c_str(), swap_folder.c_str()) != 0)
    return errno = EIO, -1;
  return real_system_calls().bind(fd, address, size);
}

}  // namespace

TEST_CASE("the socket folder swapped just before bind: the socket lands in the checked folder, nothing else changes",
          "[cpu][hostile][bootstrap]") {
  const std::string base = test::fresh_dir("arfuse-bootstrap");
  swap_folder = base + "/job", swap_moved = base + "/job.moved", swap_victim = base + "/victim";
  REQUIRE(::mkdir(swap_folder.c_str(), 0700) == 0);
  REQUIRE(::mkdir(swap_victim.c_str(), 0700) == 0);
  const std::string victim_file = swap_victim + "/rendezvous.sock";
  { std::ofstream(victim_file) << "a file of the victim"; }
  REQUIRE(::chmod(victim_file.c_str(), 0644) == 0);
  ScopedSystemCalls restore;
  system_calls().bind = bind_after_swap;
  REQUIRE_THROWS_WITH(local_socket_bootstrap(swap_folder + "/rendezvous.sock", 0, 2, milliseconds(300)),
                      Contains("rank(s) 1 did not join"));
  CHECK(mode_of(victim_file) == 0644);  // not chmod'ed through the link
  CHECK(test::read_file(victim_file).size() == std::strlen("a file of the victim"));
  CHECK_FALSE(exists(swap_moved + "/rendezvous.sock"));  // bound there, removed there at the end
}

namespace {

mode_t mode_at_bind = 0;

// Binds as the library asked, then notes the mode the new socket has before anything else runs.
int bind_and_look(int fd, const sockaddr* address, socklen_t size) {
  const int result = real_system_calls().bind(fd, address, size);
  struct stat st {};
  const auto* unix_address = reinterpret_cast<const sockaddr_un*>(address);
  if (result == 0 && ::stat(unix_address->sun_path, &st) == 0) mode_at_bind = st.st_mode & 07777;
  return result;
}

}  // namespace

TEST_CASE("the rendezvous socket is 0600 from the moment it is bound, whatever the umask",
          "[cpu][hostile][bootstrap]") {
  const std::string path = test::fresh_dir("arfuse-bootstrap") + "/rendezvous.sock";
  const mode_t saved = ::umask(0);  // the loosest umask a job may run under
  ScopedSystemCalls restore;
  system_calls().bind = bind_and_look;
  mode_at_bind = 0;
  REQUIRE_THROWS_WITH(local_socket_bootstrap(path, 0, 2, milliseconds(200)), Contains("rank(s) 1 did not join"));
  const mode_t after = ::umask(saved);
  CHECK(mode_at_bind == 0600);
  CHECK(after == 0);  // the library put the process's umask back as it found it
}

namespace {

// Connects to `path` the plain way, as a stray process would; -1 when nobody listens yet.
int connect_plain(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  ::close(fd);
  return -1;
}

// Runs rank 1 in a child process after `before` (in the child) connected strays; returns the
// child's exit code: 0 when rank 1 took part in one exchange.
pid_t start_rank1(const std::string& path, const std::string& stray) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int held = -1;
  for (int i = 0; i < 500 && held < 0; ++i) {
    held = connect_plain(path);
    if (held < 0) ::usleep(10000);
  }
  if (held < 0) _exit(7);
  if (stray == "garbage") (void)!::write(held, "GET / HTTP/1.1\r\n\r\n", 18);
  int code = 0;
  try {
    auto b = local_socket_bootstrap(path, 1, 2, milliseconds(8000));
    code = b->allgather("one")[0] == "zero" ? 0 : 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank 1: %s\n", e.what());
    code = 3;
  }
  ::close(held);
  _exit(code);
}

}  // namespace

TEST_CASE("a stray connection to the rendezvous is dropped; the job goes on", "[cpu][hostile][bootstrap]") {
  const std::string stray = GENERATE(as<std::string>{}, "silent", "garbage");
  CAPTURE(stray);
  const std::string path = test::fresh_dir("arfuse-bootstrap") + "/rendezvous.sock";
  const pid_t rank1 = start_rank1(path, stray);
  const auto start = std::chrono::steady_clock::now();
  auto b = local_socket_bootstrap(path, 0, 2, milliseconds(8000));
  CHECK(b->allgather("zero")[1] == "one");
  // A silent stray costs its handshake deadline, not the job's.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(6));
  int status = 0;
  REQUIRE(::waitpid(rank1, &status, 0) == rank1);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

TEST_CASE("one allgather round carries at most 64 MiB from all ranks together", "[cpu][hostile][bootstrap]") {
  const std::string path = test::fresh_dir("arfuse-bootstrap") + "/rendezvous.sock";
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 0;
    try {
      auto b = local_socket_bootstrap(path, 1, 2, milliseconds(8000));
      b->allgather(std::string(40u << 20, 'x'));
    } catch (const Error& e) {
      const std::string what = e.what();
      code = what.find("sent nothing") != std::string::npos || what.find("lost its connection") != std::string::npos
                 ? 5
                 : 6;
    }
    _exit(code);
  }
  auto b = local_socket_bootstrap(path, 0, 2, milliseconds(8000));
  REQUIRE_THROWS_WITH(
      b->allgather(std::string(30u << 20, 'y')),
      Contains("rank 1 sent 41943040 bytes in round 0, more than the 67108864 bytes one round may carry"));
  REQUIRE_THROWS_WITH(local_socket_bootstrap(test::fresh_dir("arfuse-bootstrap") + "/s", 0, 1, milliseconds(100))
                          ->allgather(std::string((64u << 20) + 1, 'z')),
                      Contains("more than the 67108864 bytes one round may carry"));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 5));  // rank 1 learns of it when rank 0 hangs up
}

namespace {

void write_mode(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

}  // namespace

TEST_CASE("files arfuse reads as code or runs: root's or this user's, writable by nobody else, up to /",
          "[cpu][hostile]") {
  const std::string base = test::fresh_dir();
  const std::string folder = base + "/folder", file = folder + "/file", program = folder + "/program";
  REQUIRE(::mkdir(folder.c_str(), 0755) == 0);
  write_mode(file, "text", 0644);
  write_mode(program, "#!/bin/sh\n", 0755);
  FileDescriptor fd;
  std::string why;
  CHECK(open_trusted(file, Trusted::file, fd, why));
  CHECK(open_trusted(program, Trusted::program, fd, why));
  CHECK(open_trusted(folder, Trusted::folder, fd, why));
  CHECK(open_trusted("/usr/bin/env", Trusted::program, fd, why));  // root's, through root's links where there are
  SECTION("the thing itself writable by others") {
    REQUIRE(::chmod(file.c_str(), 0666) == 0);
    CHECK_FALSE(open_trusted(file, Trusted::file, fd, why));
    CHECK_THAT(why, Contains(file + " is writable by group or others (mode 666)"));
  }
  SECTION("a folder on the way writable by others, and not sticky") {
    REQUIRE(::chmod(folder.c_str(), 0777) == 0);
    CHECK(untrusted_reason(program, Trusted::program) ==
          folder + " is writable by group or others and not sticky (mode 777): they can replace what lies below");
    CHECK_FALSE(untrusted_reason(folder, Trusted::folder).empty());
    REQUIRE(::chmod(folder.c_str(), 01777) == 0);  // sticky: what lies in it is still ours
    CHECK(untrusted_reason(program, Trusted::program).empty());
    CHECK_THAT(untrusted_reason(folder, Trusted::folder), Contains("writable by group or others"));
  }
  SECTION("the wrong kind of file, and a program nobody may run") {
    REQUIRE(::mkfifo((folder + "/fifo").c_str(), 0600) == 0);
    CHECK_THAT(untrusted_reason(folder + "/fifo", Trusted::file), Contains("is a FIFO, not a regular file"));
    CHECK_THAT(untrusted_reason(folder, Trusted::file), Contains("is a folder, not a regular file"));
    CHECK_THAT(untrusted_reason(file, Trusted::folder), Contains("is not a folder"));
    CHECK_THAT(untrusted_reason(file, Trusted::program), Contains("is not executable"));
  }
  SECTION("a file read through its checked descriptor: bounded, and never a device") {
    std::string text;
    REQUIRE(open_trusted(file, Trusted::file, fd, why));
    CHECK(read_bounded(fd.get(), 4, text, why));
    CHECK(text == "text");
    REQUIRE(open_trusted(file, Trusted::file, fd, why));
    CHECK_FALSE(read_bounded(fd.get(), 3, text, why));
    CHECK_THAT(why, Contains("holds 4 bytes; at most 3 are read"));
    FileDescriptor zero(::open("/dev/zero", O_RDONLY | O_CLOEXEC));
    CHECK_FALSE(read_bounded(zero.get(), 1 << 20, text, why));
    CHECK_THAT(why, Contains("a device, not a regular file"));
  }
}

TEST_CASE("a file owned by another user is not loaded or run, nor one below their folder", "[cpu][hostile][root]") {
  const std::string base = test::fresh_dir();
  const std::string folder = base + "/folder", file = folder + "/file";
  REQUIRE(::mkdir(folder.c_str(), 0755) == 0);
  write_mode(file, "text", 0755);
  REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
  CHECK_THAT(untrusted_reason(file, Trusted::program), Contains(file + " is owned by uid 65534"));
  REQUIRE(::chown(file.c_str(), 0, 0) == 0);
  REQUIRE(::chown(folder.c_str(), 65534, 65534) == 0);
  CHECK_THAT(untrusted_reason(file, Trusted::file), Contains(folder + " is owned by uid 65534"));
}

TEST_CASE("templates, tuning tables, the AMD clang and libraries named by a path follow the same rule",
          "[cpu][hostile]") {
  const std::string open_folder = test::fresh_dir();
  REQUIRE(::chmod(open_folder.c_str(), 0777) == 0);  // anyone could put or swap a file here
  const std::string templates = test::fresh_dir();
  for (const char* sub : {"/quant", "/arfuse"}) REQUIRE(::mkdir((templates + sub).c_str(), 0755) == 0);
  for (const auto& name : jit::template_names()) {
    write_mode(templates + "/" + name, jit::load_template(name).text, 0644);
  }
  SECTION("ARFUSE_TEMPLATE_DIR") {
    test::ScopedEnv env("ARFUSE_TEMPLATE_DIR", templates.c_str());
    CHECK_NOTHROW(jit::render(jit::KernelSpec::parse("token_quant/h2048/bf16/sm_90")));
    REQUIRE(::chmod((templates + "/epilogue.cuh").c_str(), 0666) == 0);
    CHECK_THROWS_WITH(jit::render(jit::KernelSpec::parse("token_quant/h2048/bf16/sm_90")),
                      Contains(templates + "/epilogue.cuh is writable by group or others"));
    REQUIRE(::chmod((templates + "/epilogue.cuh").c_str(), 0644) == 0);
    REQUIRE(::chmod(templates.c_str(), 0777) == 0);
    CHECK_THROWS_AS(settings::check_all(), ConfigError);
    CHECK_THROWS_WITH(jit::render(jit::KernelSpec::parse("token_quant/h2048/bf16/sm_90")),
                      Contains(templates + " is writable by group or others"));
  }
  SECTION("ARFUSE_TUNING") {
    const std::string table = open_folder + "/tuning.json";
    write_mode(table, R"({"targets": {}})", 0644);
    test::ScopedEnv env("ARFUSE_TUNING", table.c_str());
    CHECK_THROWS_WITH(jit::TuningTable::from_environment(),
                      Contains(open_folder + " is writable by group or others and not sticky"));
    test::ScopedEnv device("ARFUSE_TUNING", "/dev/zero");
    CHECK_THROWS_WITH(settings::check_all(), Contains("ARFUSE_TUNING='/dev/zero' is not a readable file"));
  }
  SECTION("ARFUSE_AMD_CLANG") {
    const std::string clang = open_folder + "/clang";
    write_mode(clang, "#!/bin/sh\necho planted\n", 0755);
    test::ScopedEnv env("ARFUSE_AMD_CLANG", clang.c_str());
    CHECK_THROWS_WITH(
        jit::amd_clang_compiler(),
        Contains("ARFUSE_AMD_CLANG='" + clang + "' is refused: " + open_folder + " is writable by group or others"));
  }
  SECTION("a library named by a path (ARFUSE_NCCL_LIBRARY, the vendor libraries' ROCm folders)") {
    const std::string library = open_folder + "/libplanted.so";
    write_mode(library, "", 0755);
    CHECK_THROWS_WITH(DynamicLibrary("a planted library", {library}),
                      Contains(library + ": refused: " + open_folder + " is writable by group or others"));
    const std::string mine = test::fresh_dir() + "/libempty.so";
    write_mode(mine, "", 0755);
    // Trusted, so the loader is asked, and refuses an empty file: proof the check let it through.
    CHECK_THROWS_WITH(DynamicLibrary("an empty library", {mine}), !Contains("refused"));
  }
}
