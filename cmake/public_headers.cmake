# The headers installed with libarfuse: the public API. Everything else under arfuse/ is
# internal to its layer (vendor drivers, peer set-up steps, file formats, test seams).
# tests/downstream builds against an install tree and includes every one of these.
set(ARFUSE_PUBLIC_HEADERS
    base/log.hpp base/settings.hpp base/sha256.hpp base/version.hpp
    templates/host_device.cuh templates/limits.cuh templates/signal.cuh
    jit/block_shape.hpp jit/compiler.hpp jit/kernel_spec.hpp jit/render.hpp
    jit/spec_set.hpp jit/target.hpp jit/templates.hpp jit/tuning.hpp
    cache/cache_entry.hpp cache/cache_key.hpp cache/disk_cache.hpp cache/entry_file.hpp cache/kernel_cache.hpp
    runtime/context.hpp runtime/epilogue.hpp runtime/group.hpp
    runtime/device/device.hpp runtime/device/ipc.hpp
    runtime/plan/plan.hpp runtime/plan/topology.hpp
    runtime/setup/bootstrap.hpp runtime/setup/group_options.hpp)
