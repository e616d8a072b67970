// libFuzzer target: the cache entry reader (header bounds, sizes, checksums) and what a verified
// entry's metadata is read with. Any crash, sanitizer report or exception other than
// arfuse::Error is a finding. Run by scripts/fuzz.sh; seeds in seeds/entry.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "arfuse/error.hpp"

#include "cache/cache_entry.hpp"
#include "cache/kernel_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> bytes(data, data + size);
  arfuse::cache::CacheEntry entry;
  std::string problem;
  if (size >= sizeof(arfuse::cache::EntryHeader)) {
    std::uint8_t fixed[sizeof(arfuse::cache::EntryHeader)];
    std::copy(data, data + sizeof(fixed), fixed);
    arfuse::cache::EntryHeader header{};
    std::uint64_t expected = 0;
    arfuse::cache::parse_header(fixed, header, expected, problem);
  }
  if (arfuse::cache::deserialize(bytes, entry, problem)) arfuse::cache::spec_of(entry);
  return 0;
}
