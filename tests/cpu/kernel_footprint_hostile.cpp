// [cpu][hostile] Code objects built to exhaust the footprint reader: an ELF whose sections each
// span the file, an AMDGPU metadata note nested a million deep, absurd register counts. Each is
// refused as malformed with an arfuse::Error, and the cache tools report it for that entry and go
// on to the next.
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "cache/disk_cache.hpp"
#include "jit/elf_file.hpp"
#include "jit/kernel_footprint.hpp"

#include "support.hpp"

using namespace arfuse;
using Catch::Contains;

namespace {

using Bytes = std::vector<std::uint8_t>;

template <typename T>
void put(Bytes& b, std::size_t at, T value) {
  if (b.size() < at + sizeof(T)) b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &value, sizeof(T));
}

struct Section {
  std::uint32_t name = 0, type = 0;
  std::uint64_t offset = 0, size = 0;
};

// A little-endian ELF64 file: `data` after the 64-byte header, then the section headers.
Bytes elf_file(std::uint16_t machine, const Bytes& data, const std::vector<Section>& sections,
               std::uint16_t name_table) {
  Bytes b(64, 0);
  std::memcpy(b.data(),
              "\x7f"
              "ELF",
              4);
  b[4] = 2, b[5] = 1, b[6] = 1;
  put<std::uint16_t>(b, 0x10, 1);
  put<std::uint16_t>(b, 0x12, machine);
  put<std::uint32_t>(b, 0x14, 1);
  b.insert(b.end(), data.begin(), data.end());
  put<std::uint64_t>(b, 0x28, b.size());
  put<std::uint16_t>(b, 0x34, 64);
  put<std::uint16_t>(b, 0x3A, 64);
  put<std::uint16_t>(b, 0x3C, std::uint16_t(sections.size()));
  put<std::uint16_t>(b, 0x3E, name_table);
  for (const Section& s : sections) {
    const std::size_t at = b.size();
    b.resize(at + 64, 0);
    put(b, at, s.name);
    put(b, at + 4, s.type);
    put(b, at + 0x18, s.offset);
    put(b, at + 0x20, s.size);
  }
  return b;
}

// `count` sections that each span the whole file (the header table included).
Bytes spanning_sections(std::size_t count) {
  std::vector<Section> sections(count);
  Bytes b = elf_file(190, Bytes(64, 'x'), sections, 0);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = 128 + i * 64;
    put<std::uint32_t>(b, at + 4, 1);  // PROGBITS
    put<std::uint64_t>(b, at + 0x18, 0);
    put<std::uint64_t>(b, at + 0x20, b.size());
  }
  return b;
}

// An AMD code object whose metadata note is MessagePack `description`.
Bytes amd_code_object(const Bytes& description) {
  const std::string names("\0.shstrtab\0.note\0", 17);
  Bytes data(names.begin(), names.end());
  const std::uint64_t note_at = 64 + data.size();
  Bytes note;
  put<std::uint32_t>(note, 0, 7);  // "AMDGPU\0"
  put<std::uint32_t>(note, 4, std::uint32_t(description.size()));
  put<std::uint32_t>(note, 8, 32);  // NT_AMDGPU_METADATA
  const char name[8] = "AMDGPU";
  note.insert(note.end(), name, name + 8);
  note.insert(note.end(), description.begin(), description.end());
  note.resize((note.size() + 3) & ~std::size_t(3), 0);
  data.insert(data.end(), note.begin(), note.end());
  return elf_file(0xE0, data, {{}, {1, 3, 64, names.size()}, {11, 7, note_at, note.size()}}, 1);
}

Bytes nested_msgpack(std::size_t depth) {
  Bytes b(depth, 0x91);  // a fixarray of one element, a million times
  b.push_back(0xc0);     // nil
  return b;
}

// A cache folder with a bomb (an entry with valid checksums whose payload is `payload`) and one
// ordinary entry after it.
std::string folder_with(const Bytes& payload, const std::string& spec) {
  const std::string dir = test::fresh_dir();
  cache::DiskCache disk(dir);
  cache::CacheEntry bomb;
  bomb.key.fill(0x11);
  bomb.lowered_name = "bomb";
  bomb.metadata = R"({"spec": ")" + spec + R"("})";
  bomb.payload = payload;
  Digest source{};
  source.fill(0x01);
  REQUIRE(disk.put(source, bomb));
  cache::CacheEntry plain = bomb;
  plain.key.fill(0x22);
  plain.payload = Bytes(16, 0);  // not ELF: unreadable too, but the listing reaches it
  source.fill(0x02);
  REQUIRE(disk.put(source, plain));
  return dir;
}

}  // namespace

TEST_CASE("an ELF file whose sections each span the file is refused, not copied 65,535 times", "[cpu][hostile]") {
  const Bytes many = spanning_sections(65535);
  REQUIRE_THROWS_AS(jit::elf_sections(many), Error);
  REQUIRE_THROWS_WITH(jit::elf_sections(many), Contains("65535 sections"));
  REQUIRE_THROWS_WITH(jit::kernel_footprint(many), Contains("malformed ELF file"));
  const Bytes overlapping = spanning_sections(4000);  // under the section bound: the copy bound refuses it
  REQUIRE_THROWS_WITH(jit::elf_sections(overlapping), Contains("more than four times the file"));
  REQUIRE_THROWS_WITH(jit::elf_code_sections(overlapping), Contains("malformed ELF file"));
}

TEST_CASE("an AMDGPU metadata note nested a million deep is refused, not recursed into", "[cpu][hostile]") {
  const Bytes deep = amd_code_object(nested_msgpack(1000000));
  REQUIRE_THROWS_WITH(jit::code_object_footprint(deep), Contains("nested deeper than 64 levels"));
  REQUIRE_THROWS_WITH(jit::kernel_footprint(deep), Contains("malformed AMD code object"));
  // The same reader takes a shallow note: the bound is on depth, not on MessagePack.
  const Bytes shallow = amd_code_object(nested_msgpack(3));
  REQUIRE_THROWS_WITH(jit::code_object_footprint(shallow), Contains("lists one in amdhsa.kernels"));
}

TEST_CASE("the cache tools report a bomb as that entry's problem and go on to the next entry", "[cpu][hostile]") {
  const auto [payload, spec] = GENERATE(table<Bytes, std::string>({
      {spanning_sections(65535), "token_quant/h2048/bf16/sm_90"},
      {spanning_sections(4000), "token_quant/h2048/bf16/sm_90"},
      {amd_code_object(nested_msgpack(1000000)), "token_quant/h2048/bf16/gfx942"},
  }));
  CAPTURE(spec, payload.size());
  const std::string dir = folder_with(payload, spec);
  const auto ls = test::run(test::kCacheTool + " --cache-dir " + dir + " ls --footprint");
  CHECK(ls.status == 0);
  CHECK(test::count_of(ls.output, "footprint unreadable: malformed") == 1);                       // the bomb
  CHECK(test::count_of(ls.output, "footprint unreadable: not a little-endian ELF64 file") == 1);  // the next entry
  const auto diff = test::run(test::kCacheTool + " --cache-dir " + dir + " code-diff " + dir);
  CHECK(diff.status == 1);
  CHECK(test::count_of(diff.output, "UNREADABLE") == 4);  // both entries, on both sides
  CHECK_THAT(diff.output, !Contains("bad_alloc") && !Contains("Segmentation"));
}

TEST_CASE("an AMD code object claiming absurd register or memory counts has no footprint", "[cpu][hostile]") {
  const auto [key, value] = GENERATE(table<std::string, std::uint64_t>({
      {".vgpr_count", 4294967295u},
      {".vgpr_count", 1u << 27},
      {".sgpr_count", 100000},
      {".agpr_count", 513},
      {".group_segment_fixed_size", 2147483647u},
      {".private_segment_fixed_size", 1ull << 40},
  }));
  CAPTURE(key, value);
  nlohmann::json kernel{{".vgpr_count", 32}, {".sgpr_count", 16}};
  kernel[key] = value;
  const auto msgpack = nlohmann::json::to_msgpack(nlohmann::json{{"amdhsa.kernels", {kernel}}});
  CHECK_THROWS_WITH(jit::code_object_footprint(amd_code_object(msgpack)),
                    Contains("malformed AMD code object: metadata " + key + " is not a count from 0 to"));
  kernel[key] = 8;  // the same object with a plausible count reads
  CHECK(jit::code_object_footprint(
            amd_code_object(nlohmann::json::to_msgpack(nlohmann::json{{"amdhsa.kernels", {kernel}}})))
            .registers > 0);
}
