// SHA-256 (FIPS 180-4), for cache keys and payload checksums, and HMAC-SHA256.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "arfuse/error.hpp"

namespace arfuse {

using Digest = std::array<std::uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, std::size_t size);
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  // Length-prefixed field, so that ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view text);
  Digest finish();

 private:
  void compress(const std::uint8_t* block);
  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

Digest sha256(const void* data, std::size_t size);
// HMAC-SHA256 (RFC 2104): the bootstrap's proof of a shared secret.
Digest hmac_sha256(std::string_view key, std::string_view message);
// Compares without an early exit, so the time taken does not tell how much matched.
bool equal_in_constant_time(const Digest& a, const Digest& b);
std::string to_hex(const Digest& digest);

}  // namespace arfuse
