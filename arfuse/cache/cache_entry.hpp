// A cache entry on disk: a fixed header, the lowered kernel name, a JSON description (spec,
// compiler, template digests), then the payload (cubin or AMD code object).
//
//   offset  size  field
//   0       8     magic "ARFUSE\0E"
//   8       4     format version (kCacheFormatVersion)
//   12      4     lowered name size N
//   16      4     metadata JSON size J
//   20      4     reserved (0)
//   24      8     payload size P
//   32      32    key: SHA-256 over the cache key fields (cache_key.hpp)
//   64      32    SHA-256 of the payload
//   96      32    SHA-256 of bytes 0..95 followed by the name and the JSON
//   128     N     lowered name, then J bytes of JSON, then P bytes of payload
// All integers little-endian. Change any of it and you MUST bump kCacheFormatVersion; the
// golden file tests/golden/entry-v1.bin pins this layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "arfuse/error.hpp"

#include "base/sha256.hpp"

namespace arfuse::cache {

constexpr std::uint32_t kCacheFormatVersion = 1;
constexpr char kEntryMagic[8] = {'A', 'R', 'F', 'U', 'S', 'E', '\0', 'E'};

struct EntryHeader {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t lowered_name_size;
  std::uint32_t metadata_size;
  std::uint32_t reserved;
  std::uint64_t payload_size;
  std::uint8_t key[32];
  std::uint8_t payload_sha256[32];
  std::uint8_t header_sha256[32];
};
static_assert(sizeof(EntryHeader) == 128, "cache entry header layout: bump kCacheFormatVersion");
static_assert(offsetof(EntryHeader, payload_size) == 24, "cache entry header layout");
static_assert(offsetof(EntryHeader, key) == 32, "cache entry header layout");
static_assert(offsetof(EntryHeader, header_sha256) == 96, "cache entry header layout");

struct CacheEntry {
  Digest key{};
  std::string lowered_name;
  std::string metadata;  // JSON: {"spec": ..., "compiler": ..., ...}
  std::vector<std::uint8_t> payload;
};

// Bounds on the variable parts. Real entries are far below them (names ~200 B, metadata ~2 KiB,
// code objects < 2 MiB); a header beyond them is damaged or hostile and is refused before any
// allocation.
constexpr std::uint64_t kMaxLoweredNameBytes = 64u << 10;
constexpr std::uint64_t kMaxMetadataBytes = 1u << 20;
constexpr std::uint64_t kMaxPayloadBytes = 256u << 20;

std::vector<std::uint8_t> serialize(const CacheEntry& entry);

// Checks the fixed header alone: magic, version, and every size field against the bounds above;
// on success `entry_size` is the exact file size the header promises (no arithmetic can wrap).
bool parse_header(const std::uint8_t (&bytes)[sizeof(EntryHeader)], EntryHeader& header, std::uint64_t& entry_size,
                  std::string& problem);

// Parses and verifies every field; on any problem returns false and says why in `problem`.
bool deserialize(const std::vector<std::uint8_t>& bytes, CacheEntry& entry, std::string& problem);

}  // namespace arfuse::cache
