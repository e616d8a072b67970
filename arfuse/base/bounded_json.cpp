#include "base/bounded_json.hpp"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>

#include <cstring>

#include "base/trusted_folder.hpp"

namespace arfuse {
namespace {

// nlohmann's own tree builder, stopped (not recursed into) one level past the bound: a SAX
// callback that returns false ends the parse where it stands.
class DepthLimitedBuilder : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
  using Builder = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;

 public:
  explicit DepthLimitedBuilder(nlohmann::json& result) : Builder(result, false) {}

  bool start_object(std::size_t elements) { return enter() && Builder::start_object(elements); }
  bool end_object() { return leave() && Builder::end_object(); }
  bool start_array(std::size_t elements) { return enter() && Builder::start_array(elements); }
  bool end_array() { return leave() && Builder::end_array(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    why_ = e.what();
    return false;
  }
  const std::string& why() const { return why_; }

 private:
  bool enter() {
    if (++depth_ <= kMaxJsonDepth) return true;
    why_ = fmt::format("nested deeper than {} levels", kMaxJsonDepth);
    return false;
  }
  bool leave() {
    --depth_;
    return true;
  }

  int depth_ = 0;
  std::string why_;
};

template <typename Parse>
bool build(nlohmann::json& out, std::string& why, Parse&& parse) {
  nlohmann::json result;
  DepthLimitedBuilder builder(result);
  bool ok = false;
  try {
    ok = parse(builder);
  } catch (const nlohmann::json::exception& e) {  // e.g. a declared size past what the library allows
    why = e.what();
    return false;
  }
  if (!ok || result.is_discarded()) {
    why = builder.why().empty() ? "not a complete value" : builder.why();
    return false;
  }
  out = std::move(result);
  return true;
}

}  // namespace

bool parse_json(std::string_view text, nlohmann::json& out, std::string& why) {
  return build(out, why, [&](DepthLimitedBuilder& b) { return nlohmann::json::sax_parse(text, &b); });
}

bool parse_msgpack(const std::vector<std::uint8_t>& bytes, nlohmann::json& out, std::string& why) {
  return build(out, why, [&](DepthLimitedBuilder& b) {
    return nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &b, nlohmann::json::input_format_t::msgpack, true);
  });
}

}  // namespace arfuse

namespace arfuse {

bool read_config_file(const std::string& path, std::string& text, std::string& why) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; read_bounded refuses it.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    why = fmt::format("cannot open it: {}", std::strerror(errno));
    return false;
  }
  return read_bounded(fd.get(), kMaxConfigBytes, text, why);
}

}  // namespace arfuse
