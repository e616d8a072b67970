// The names of an enum's values, written once as a table: to_string, parsing and the list of
// values all read it, so adding a value is one line. An enum with a to_string formats by its
// name in fmt ("quant {}").
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse {

template <typename Enum>
using Names = std::vector<std::pair<Enum, const char*>>;

template <typename Enum>
const char* name_in(const Names<Enum>& names, Enum value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";
}

// Throws Error "unknown <what> '<text>': allowed are <names>".
template <typename Enum>
Enum parse_in(const Names<Enum>& names, const char* what, std::string_view text) {
  std::string allowed;
  for (const auto& [v, name] : names) {
    if (text == name) return v;
    allowed += (allowed.empty() ? "" : ", ") + std::string(name);
  }
  throw Error(fmt::format("unknown {} '{}': allowed are {}", what, text, allowed));
}

template <typename Enum>
std::vector<Enum> values_in(const Names<Enum>& names) {
  std::vector<Enum> out;
  for (const auto& entry : names) out.push_back(entry.first);
  return out;
}

}  // namespace arfuse

namespace arfuse::detail {
template <typename E, typename = void>
struct has_name : std::false_type {};
template <typename E>
struct has_name<E, std::void_t<decltype(to_string(std::declval<E>()))>> : std::is_enum<E> {};
}  // namespace arfuse::detail

template <typename E>
struct fmt::formatter<E, char, std::enable_if_t<arfuse::detail::has_name<E>::value>>
    : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(E value, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(to_string(value), ctx);
  }
};
