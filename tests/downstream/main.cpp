// Uses the public API from outside the project, through <arfuse/arfuse.hpp> alone: checks a mode,
// validates a call's arguments, reads the settings and the cache folder. No GPU needed.
#include <cstdio>

#include <arfuse/arfuse.hpp>

int main() {
  arfuse::EpilogueMode mode;
  mode.quant = arfuse::Quant::fp8_group;
  mode.group_size = 64;
  mode.validate(4096);
  try {
    arfuse::validate_args(arfuse::AllreduceRmsnormArgs{}, 128, 8192);  // hidden 0: refused
    return 1;
  } catch (const arfuse::Error&) {  // thrown inside libarfuse, caught here: the type crosses the boundary
  }
  const arfuse::Target target = arfuse::Target::parse("sm_90");
  std::printf("downstream: arfuse %s, %s, %s on %s, %zu settings, cache %s\n", arfuse::version(), mode.text().c_str(),
              arfuse::to_string(arfuse::Path::two_stage), target.name().c_str(), arfuse::settings::all().size(),
              arfuse::default_cache_dir().c_str());
  return 0;
}
