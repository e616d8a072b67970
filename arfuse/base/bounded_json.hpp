// Parsing JSON text and MessagePack that arrive from outside (configuration files, cache entry
// metadata, the AMDGPU metadata note of a code object) with a bound on nesting: nlohmann's
// readers recurse once per level, so a document nested a million deep would overflow the stack
// instead of being refused. Sizes are bounded by the input itself (no reader allocates ahead of
// the bytes it has read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

namespace arfuse {

// Far deeper than any document arfuse reads or writes (three or four levels).
constexpr int kMaxJsonDepth = 64;
// Far larger than any configuration, spec set or tuning table (the default spec set's JSON is a
// few KiB); a larger file, or anything that is not a regular file (/dev/zero), is refused unread.
constexpr std::size_t kMaxConfigBytes = 4 << 20;

// The text of the configuration file at `path`: a regular file of at most kMaxConfigBytes. False
// with `why` otherwise.
bool read_config_file(const std::string& path, std::string& text, std::string& why);

// False with `why` (the parser's message, or the nesting bound) when `text` is not one JSON value
// nested at most kMaxJsonDepth deep.
bool parse_json(std::string_view text, nlohmann::json& out, std::string& why);
// The same for MessagePack bytes.
bool parse_msgpack(const std::vector<std::uint8_t>& bytes, nlohmann::json& out, std::string& why);

}  // namespace arfuse
