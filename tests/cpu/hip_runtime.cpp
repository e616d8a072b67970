// [cpu][hip] The HIP backend where there is no AMD GPU (CI: Debian 12's libamdhip64 5.2): the
// table binds, every entry point that needs a device fails with Unavailable naming the library
// and its version, HIP error codes become DeviceError with HIP's names, gcnArchName parsing,
// and the backend choice. The [gpu] suites run through the same backend on the H200 with
// HIP_OVER_CUDA_FOR_TESTS=1 (tools/hip_over_cuda/hip_over_cuda.hpp).
#include "runtime/device/hip_runtime.hpp"

#include <cstdlib>
#include <string>

#include "arfuse/error.hpp"

#include "runtime/device/backend.hpp"

#include "hip_over_cuda.hpp"
#include "support.hpp"

using namespace arfuse;
using Catch::Contains;

namespace {

// The description of the installed libamdhip64 (the [libamdhip64] cases run only where there is one).
std::string installed_hip() { return hip::bind_without_init(); }

}  // namespace

TEST_CASE("the HIP table binds every entry point of the installed libamdhip64", "[cpu][hip][libamdhip64]") {
  const std::string description = installed_hip();
  CHECK_THAT(description, Contains("HIP ") && Contains("libamdhip64"));
}

TEST_CASE("without an AMD GPU every HIP entry point that needs one is Unavailable, naming the library",
          "[cpu][hip][libamdhip64][nogpu]") {
  const std::string description = installed_hip();
  const auto& b = device::hip_backend();
  // Catch2 v2 combined matchers keep references to their parts: build one per use.
#define NAMES_LIBRARY (Contains(description) && Contains("no usable AMD GPU"))
  REQUIRE_THROWS_AS(b.device_count(), Unavailable);
  REQUIRE_THROWS_WITH(b.device_count(), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.properties(0), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.retain_context(0), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.allocate(64, MemoryKind::signal), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.create_stream(), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.create_event(), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.load_module({1, 2, 3}), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.export_ipc(nullptr), NAMES_LIBRARY);
  REQUIRE_THROWS_WITH(b.open_ipc(std::string(64, '\0')), NAMES_LIBRARY);
#undef NAMES_LIBRARY
}

TEST_CASE("HIP error codes become DeviceError with HIP's name, text and the runtime", "[cpu][hip][libamdhip64]") {
  const std::string description = installed_hip();
  REQUIRE_NOTHROW(hip::check(hip::kSuccess, "hipNothing"));
  try {
    hip::check(hip::kErrorNoDevice, "hipSomething");
    FAIL("no exception");
  } catch (const DeviceError& e) {
    CHECK(e.code() == 100);
    CHECK_THAT(e.what(),
               Contains("hipSomething failed") && Contains("hipErrorNoDevice (100)") && Contains(description));
  }
  try {
    hip::check(hip::kErrorPeerAccessAlreadyEnabled, "hipDeviceEnablePeerAccess");
    FAIL("no exception");
  } catch (const DeviceError& e) {
    CHECK(e.code() == 704);
    CHECK_THAT(e.what(), Contains("hipErrorPeerAccessAlreadyEnabled"));
  }
}

TEST_CASE("gcnArchName names the target; feature suffixes are not part of it", "[cpu][hip]") {
  CHECK(hip::target_of_arch_name("gfx942:sramecc+:xnack-") == "gfx942");
  CHECK(hip::target_of_arch_name("gfx90a:sramecc-:xnack+") == "gfx90a");
  CHECK(hip::target_of_arch_name("gfx1250") == "gfx1250");
  CHECK(hip::target_of_arch_name("gfx1100") == "gfx1100");
  CHECK(hip::target_of_arch_name("sm_90") == "sm_90");  // what the tests' adapter reports
  REQUIRE_THROWS_WITH(hip::target_of_arch_name("radeon:xnack-"),
                      Contains("'radeon:xnack-'") && Contains("does not know"));
  REQUIRE_THROWS_AS(hip::target_of_arch_name(""), Error);
}

TEST_CASE("the device backend is chosen by ARFUSE_DEVICE_BACKEND: cuda, hip or auto", "[cpu][hip]") {
  CHECK(std::string(device::select_backend("cuda").name()) == "CUDA driver");
  CHECK(std::string(device::select_backend("hip").name()) == "HIP");
  REQUIRE_THROWS_AS(device::select_backend("metal"), ConfigError);
  REQUIRE_THROWS_WITH(device::select_backend("metal"), Contains("use cuda, hip or auto"));
  if (Device::count() == 0) {  // auto on a machine without any GPU names both runtimes
    REQUIRE_THROWS_AS(device::select_backend("auto"), Unavailable);
    REQUIRE_THROWS_WITH(device::select_backend("auto"), Contains("no GPU runtime has a GPU here") && Contains("CUDA"));
  }
}

TEST_CASE("the [gpu] suites run through the backend asked for", "[gpu][hip]") {
  const Device device(0);
  if (arfuse::tools::hip_over_cuda_requested()) {
    // Every device call of this process goes through the HIP backend's code; the target comes
    // from gcnArchName as the adapter reports it.
    CHECK(std::string(Device::runtime()) == "HIP");
    CHECK(device.target().name().rfind("sm_", 0) == 0);
  } else {
    CHECK(std::string(Device::runtime()) == "CUDA driver");
  }
  WARN("device layer: " << Device::runtime() << ", " << device.name() << " (" << device.target().name() << ")");
}
