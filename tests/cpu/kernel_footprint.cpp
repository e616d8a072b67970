// A kernel's registers, shared and local memory read from its cubin, and the blocks per SM they
// allow, against NVIDIA's occupancy rules and what the H200's driver reported for arfuse's kernels;
// a cubin claiming counts no kernel can have is malformed, never an overflow.
#include "jit/kernel_footprint.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "cache/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "jit/elf_file.hpp"
#include "jit/render.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using Catch::Contains;

namespace {

int blocks(const char* target, int threads, int registers, int shared = 0, int local = 0) {
  return nvidia_resident_blocks(Target::parse(target), threads, KernelFootprint{registers, shared, local});
}

// A one-kernel program of this test's own, compiled as the JIT compiles arfuse's kernels.
CompiledCode compile_kernel(const std::string& name, const std::string& body) {
  Source src = render(KernelSpec::parse("token_quant/h8/bf16/sm_90"));
  src.program_name = name + ".cu";
  src.text = body;
  src.name_expression = name;
  return nvrtc_compiler()->compile(src);
}

}  // namespace

TEST_CASE("blocks per SM: NVIDIA's occupancy rules, at the counts the H200's driver reported", "[cpu][jit]") {
  // Driver occupancy seen in arfuse-bench's resources column on the H200: the epilogue at 512
  // threads with 38 and 32 registers, at 384 threads with 53 and 40, fused W = 8 at 384 threads
  // with 72 and 80.
  CHECK(blocks("sm_90", 512, 38, 17680) == 3);
  CHECK(blocks("sm_90", 512, 32, 17680) == 4);
  CHECK(blocks("sm_90", 384, 53, 13584) == 3);
  CHECK(blocks("sm_90", 384, 40, 13584) == 4);
  CHECK(blocks("sm_90", 384, 72) == 2);
  CHECK(blocks("sm_90", 384, 80) == 2);
  // Registers go out per warp in units of 256: 43 registers take what 48 do.
  CHECK(blocks("sm_90", 512, 43) == blocks("sm_90", 512, 48));
  CHECK(blocks("sm_90", 512, 43) == 2);
  // Threads: 2048 per SM on sm_90, 1536 on sm_89, 1024 on sm_75; at most 32 / 24 / 16 blocks.
  CHECK(blocks("sm_90", 128, 16) == 16);
  CHECK(blocks("sm_90", 32, 16) == 32);
  CHECK(blocks("sm_89", 32, 16) == 24);
  CHECK(blocks("sm_75", 512, 16) == 2);
  CHECK(blocks("sm_89", 512, 16) == 3);
  // Shared memory: 228 KiB on sm_90 less 1 KiB per block; 100 KiB on sm_89.
  CHECK(blocks("sm_90", 128, 16, 56 * 1024) == 4);
  CHECK(blocks("sm_90", 128, 16, 56 * 1024 + 1) == 3);
  CHECK(blocks("sm_89", 128, 16, 49 * 1024) == 2);
  CHECK(blocks("sm_90", 128, 16, 228 * 1024) == 0);
  // Dynamic shared memory counts as static does.
  const KernelFootprint epilogue{32, 17680, 0};
  CHECK(nvidia_resident_blocks(Target::parse("sm_90"), 512, epilogue, 39 * 1024) == 3);
  CHECK(describe(Target::parse("sm_90"), 512, epilogue) ==
        "32 registers, 17680 B shared, 4 blocks of 512 threads per SM");
  CHECK(describe(Target::parse("sm_90"), 256, KernelFootprint{48, 4096, 8}) ==
        "48 registers, 4096 B shared, 8 B local, 5 blocks of 256 threads per SM");
}

TEST_CASE("a cubin's footprint: its registers, static shared memory and local frame", "[cpu][nvrtc]") {
  // 1000 floats of shared memory; a local array indexed by the thread, which must live in memory.
  const CompiledCode code = compile_kernel("footprint_probe", R"(
extern "C" __global__ void footprint_probe(float* out, int n) {
  __shared__ float staged[1000];
  float local[64];
  for (int i = 0; i < 64; ++i) local[i] = out[i * n];
  local[threadIdx.x % 64] += 1.0f;
  staged[threadIdx.x] = local[threadIdx.x * 7 % 64];
  __syncthreads();
  out[threadIdx.x] = staged[999 - threadIdx.x];
}
)");
  const KernelFootprint f = cubin_footprint(code.payload);
  CHECK(f.shared_bytes == 4000);
  CHECK(f.local_bytes >= 256);
  CHECK(f.registers >= 1);
  CHECK(f.registers <= 255);

  // arfuse's epilogue: the .nv.shared section holds its arrays and the 1 KiB the system keeps.
  const CompiledCode epilogue =
      nvrtc_compiler()->compile(render(KernelSpec::parse("rmsnorm_quant/h8192/bf16/mxfp4/rms/sm_90")));
  const KernelFootprint e = cubin_footprint(epilogue.payload);
  CHECK(elf_code_sections(epilogue.payload).at(".nv.shared." + epilogue.lowered_name) ==
        std::to_string(e.shared_bytes + 1024) + " bytes");
  CHECK(e.shared_bytes >= 512 * 2 * 16);  // the staged weight
  CHECK(e.local_bytes == 0);
  CHECK(e.registers >= 16);
}

TEST_CASE("a file that is not a one-kernel cubin has no footprint", "[cpu][nvrtc]") {
  CHECK_THROWS_WITH(cubin_footprint({}), Contains("not a little-endian ELF64 file"));
  std::vector<std::uint8_t> header(64, 0);
  header[0] = 0x7f, header[1] = 'E', header[2] = 'L', header[3] = 'F', header[4] = 2, header[5] = 1;
  header[0x3A] = 64;  // section header size; no sections
  CHECK_THROWS_WITH(cubin_footprint(header), Contains("malformed ELF file"));
  // A cubin whose kernel attribute section is renamed: no kernel to read.
  std::vector<std::uint8_t> cubin = compile_kernel("footprint_none", R"(
extern "C" __global__ void footprint_none(float* out) { out[threadIdx.x] = 1.0f; }
)")
                                        .payload;
  const std::string name = ".nv.info.footprint_none";
  const auto at = std::search(cubin.begin(), cubin.end(), name.begin(), name.end());
  REQUIRE(at != cubin.end());
  at[7] = 'X';  // ".nv.infX."
  CHECK_THROWS_WITH(cubin_footprint(cubin), Contains("this file has 0"));
}

namespace {

template <typename T>
void put_at(std::vector<std::uint8_t>& file, std::size_t at, T value) {
  REQUIRE(at + sizeof(T) <= file.size());
  std::memcpy(file.data() + at, &value, sizeof(T));
}

// arfuse's epilogue as a cubin, with its register count (the .nv.info record for the kernel)
// replaced by `registers`.
std::vector<std::uint8_t> with_registers(std::vector<std::uint8_t> cubin, std::uint32_t registers) {
  for (const auto& s : elf_sections(cubin)) {
    if (s.name != ".nv.info") continue;
    for (std::size_t at = 0; at + 4 <= s.bytes.size();) {
      const std::size_t size = s.bytes[at] == 4 ? std::size_t(s.bytes[at + 2] | (s.bytes[at + 3] << 8)) : 0;
      if (s.bytes[at] == 4 && s.bytes[at + 1] == 0x2f && size == 8) put_at(cubin, s.offset + at + 8, registers);
      at += 4 + size;
    }
  }
  return cubin;
}

// The same with the size in the section header of .nv.shared.<kernel> replaced by `bytes`.
std::vector<std::uint8_t> with_shared(std::vector<std::uint8_t> cubin, std::uint64_t bytes) {
  std::uint64_t table = 0;
  std::uint16_t entry = 0, count = 0;
  std::memcpy(&table, cubin.data() + 0x28, 8);
  std::memcpy(&entry, cubin.data() + 0x3A, 2);
  std::memcpy(&count, cubin.data() + 0x3C, 2);
  const auto sections = elf_sections(cubin);
  for (const auto& s : sections) {
    if (s.name.rfind(".nv.shared.", 0) != 0) continue;
    for (std::uint16_t i = 0; i < count; ++i) {
      const std::size_t header = table + std::size_t(i) * entry;
      std::uint64_t offset = 0, size = 0;
      std::memcpy(&offset, cubin.data() + header + 0x18, 8);
      std::memcpy(&size, cubin.data() + header + 0x20, 8);
      if (offset == s.offset && size == s.size) put_at(cubin, header + 0x20, bytes);
    }
  }
  return cubin;
}

}  // namespace

TEST_CASE("a cubin claiming absurd registers or shared memory has no footprint, and the tools say so",
          "[cpu][nvrtc][hostile]") {
  const CompiledCode epilogue =
      nvrtc_compiler()->compile(render(KernelSpec::parse("rmsnorm_quant/h8192/bf16/none/rms/sm_90")));
  REQUIRE(cubin_footprint(with_registers(epilogue.payload, 40)).registers == 40);  // the patch finds its mark
  REQUIRE(cubin_footprint(with_shared(epilogue.payload, 5000)).shared_bytes == 5000 - 1024);
  const auto [cubin, message] = GENERATE_COPY(table<std::vector<std::uint8_t>, std::string>({
      {with_registers(epilogue.payload, 1u << 27), "134217728 registers per thread (at most 255)"},
      {with_registers(epilogue.payload, 0xffffffffu), "4294967295 registers per thread (at most 255)"},
      {with_shared(epilogue.payload, 0x7fffffffu), "2147483647 bytes of shared memory"},
      {with_shared(epilogue.payload, 1ull << 31), "2147483648 bytes of shared memory"},
  }));
  CAPTURE(message);
  CHECK_THROWS_WITH(cubin_footprint(cubin), Contains("malformed cubin: " + message));

  // Stored as an entry with valid checksums: ls --footprint reports it and goes on.
  const std::string dir = test::fresh_dir();
  cache::DiskCache disk(dir);
  cache::CacheEntry entry;
  entry.key.fill(0x33);
  entry.lowered_name = epilogue.lowered_name;
  entry.metadata = R"({"spec": "rmsnorm_quant/h8192/bf16/none/rms/sm_90"})";
  entry.payload = cubin;
  Digest source{};
  REQUIRE(disk.put(source, entry));
  const auto ls = test::run(test::kCacheTool + " --cache-dir " + dir + " ls --footprint");
  CHECK(ls.status == 0);
  CHECK_THAT(ls.output, Contains("footprint unreadable: malformed cubin: " + message));
}

TEST_CASE("blocks per SM refuses counts no kernel can have instead of overflowing", "[cpu][jit][hostile]") {
  const Target sm90 = Target::parse("sm_90");
  CHECK_THROWS_WITH(nvidia_resident_blocks(sm90, 256, KernelFootprint{1 << 27, 0, 0}), Contains("registers 0 to 255"));
  CHECK_THROWS_WITH(nvidia_resident_blocks(sm90, 256, KernelFootprint{32, INT32_MAX, 0}),
                    Contains("shared memory 0 to 262144 B"));
  CHECK_THROWS_WITH(nvidia_resident_blocks(sm90, 256, KernelFootprint{32, 1024, 0}, INT32_MAX),
                    Contains("shared memory 0 to 262144 B"));
  CHECK_THROWS_WITH(nvidia_resident_blocks(sm90, 0, KernelFootprint{32, 0, 0}), Contains("threads must be 1 to 1024"));
  CHECK_THROWS_WITH(nvidia_resident_blocks(sm90, 256, KernelFootprint{-1, 0, 0}), Contains("registers 0 to 255"));
  CHECK(nvidia_resident_blocks(sm90, 1024, KernelFootprint{255, 256 * 1024, 0}) == 0);  // fits nothing, no crash
}
