#include "cache/cache_entry.hpp"

#include <fmt/format.h>

#include <cstring>

namespace arfuse::cache {
namespace {

Digest header_digest(const EntryHeader& header, const std::string& name, const std::string& metadata) {
  EntryHeader copy = header;
  std::memset(copy.header_sha256, 0, sizeof(copy.header_sha256));
  return Sha256().update(&copy, offsetof(EntryHeader, header_sha256)).update(name).update(metadata).finish();
}

}  // namespace

std::vector<std::uint8_t> serialize(const CacheEntry& e) {
  EntryHeader h{};
  std::memcpy(h.magic, kEntryMagic, 8);
  h.format_version = kCacheFormatVersion;
  h.lowered_name_size = std::uint32_t(e.lowered_name.size());
  h.metadata_size = std::uint32_t(e.metadata.size());
  h.payload_size = e.payload.size();
  std::memcpy(h.key, e.key.data(), 32);
  const Digest payload = sha256(e.payload.data(), e.payload.size());
  std::memcpy(h.payload_sha256, payload.data(), 32);
  const Digest header = header_digest(h, e.lowered_name, e.metadata);
  std::memcpy(h.header_sha256, header.data(), 32);

  std::vector<std::uint8_t> out(sizeof(h) + e.lowered_name.size() + e.metadata.size() + e.payload.size());
  std::uint8_t* p = out.data();
  std::memcpy(p, &h, sizeof(h));
  p += sizeof(h);
  std::memcpy(p, e.lowered_name.data(), e.lowered_name.size());
  p += e.lowered_name.size();
  std::memcpy(p, e.metadata.data(), e.metadata.size());
  p += e.metadata.size();
  if (!e.payload.empty()) std::memcpy(p, e.payload.data(), e.payload.size());
  return out;
}

bool parse_header(const std::uint8_t (&bytes)[sizeof(EntryHeader)], EntryHeader& h, std::uint64_t& entry_size,
                  std::string& problem) {
  std::memcpy(&h, bytes, sizeof(h));
  if (std::memcmp(h.magic, kEntryMagic, 8) != 0) {
    problem = "not an arfuse cache entry (wrong magic)";
    return false;
  }
  if (h.format_version != kCacheFormatVersion) {
    problem = fmt::format("cache format version {}, this build reads {}", h.format_version, kCacheFormatVersion);
    return false;
  }
  // Each field is bounded first, so the sum below cannot wrap.
  if (h.lowered_name_size > kMaxLoweredNameBytes || h.metadata_size > kMaxMetadataBytes ||
      h.payload_size > kMaxPayloadBytes) {
    problem = fmt::format(
        "header sizes out of bounds: name {} (at most {}), metadata {} (at most {}), payload {} (at most {})",
        h.lowered_name_size, kMaxLoweredNameBytes, h.metadata_size, kMaxMetadataBytes, h.payload_size,
        kMaxPayloadBytes);
    return false;
  }
  entry_size = sizeof(h) + std::uint64_t(h.lowered_name_size) + std::uint64_t(h.metadata_size) + h.payload_size;
  return true;
}

bool deserialize(const std::vector<std::uint8_t>& bytes, CacheEntry& e, std::string& problem) {
  EntryHeader h{};
  if (bytes.size() < sizeof(h)) {
    problem = fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), sizeof(h));
    return false;
  }
  std::uint8_t fixed[sizeof(EntryHeader)];
  std::memcpy(fixed, bytes.data(), sizeof(fixed));
  std::uint64_t expected = 0;
  if (!parse_header(fixed, h, expected, problem)) return false;
  if (bytes.size() != expected) {
    problem = fmt::format("size is {} bytes, the header says {}", bytes.size(), expected);
    return false;
  }
  const char* p = reinterpret_cast<const char*>(bytes.data()) + sizeof(h);
  e.lowered_name.assign(p, h.lowered_name_size);
  e.metadata.assign(p + h.lowered_name_size, h.metadata_size);
  const Digest header = header_digest(h, e.lowered_name, e.metadata);
  if (std::memcmp(header.data(), h.header_sha256, 32) != 0) {
    problem = "header checksum mismatch";
    return false;
  }
  const std::uint8_t* payload = bytes.data() + sizeof(h) + h.lowered_name_size + h.metadata_size;
  e.payload.assign(payload, payload + h.payload_size);
  const Digest digest = sha256(e.payload.data(), e.payload.size());
  if (std::memcmp(digest.data(), h.payload_sha256, 32) != 0) {
    problem = "payload checksum mismatch";
    return false;
  }
  std::memcpy(e.key.data(), h.key, 32);
  return true;
}

}  // namespace arfuse::cache
