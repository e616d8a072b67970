#include "runtime/device/backend.hpp"

#include <fmt/format.h>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/load_once.hpp"
#include "base/log.hpp"

namespace arfuse::device {
namespace {

// "" when the backend finds a GPU, else why not.
std::string why_unusable(const Backend& b) {
  try {
    return b.device_count() > 0 ? std::string() : fmt::format("the {} finds no GPU", b.name());
  } catch (const Error& e) {
    return e.what();
  }
}

struct Chosen {
  const Backend* backend;
};

std::unique_ptr<Chosen> choose() {
  return std::make_unique<Chosen>(Chosen{&select_backend(settings::text("ARFUSE_DEVICE_BACKEND").value_or("auto"))});
}

}  // namespace

const Backend& select_backend(const std::string& wanted) {
  if (wanted == "cuda") return cuda_backend();
  if (wanted == "hip") return hip_backend();
  if (wanted != "auto") {
    throw ConfigError(fmt::format("ARFUSE_DEVICE_BACKEND='{}' is not a device backend: use cuda, hip or auto", wanted));
  }
  const std::string cuda = why_unusable(cuda_backend());
  if (cuda.empty()) return cuda_backend();
  const std::string hip = why_unusable(hip_backend());
  if (hip.empty()) return hip_backend();
  throw Unavailable(fmt::format("no GPU runtime has a GPU here: {}; {}", cuda, hip));
}

// Chosen once per process: every Device, buffer and kernel of the process uses one backend.
const Backend& backend() {
  static LoadOnce<Chosen> chosen;
  const Backend& b = *chosen.get(choose).backend;
  return b;
}

}  // namespace arfuse::device
