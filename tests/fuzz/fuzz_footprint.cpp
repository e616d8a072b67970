// libFuzzer target: the readers of a compiled kernel (ELF sections, symbols, notes and
// relocations; a cubin's .nv.info; an AMD code object's MessagePack metadata note) and the
// occupancy arithmetic on what they read, which the cache tools run on the payload of every entry. An arfuse::Error is
// the expected answer to a malformed file; any other exception, a crash or a sanitizer report is a finding. Run by
// scripts/fuzz.sh; seeds in seeds/footprint (cubins and AMD code objects arfuse compiled).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "arfuse/error.hpp"

#include "jit/elf_file.hpp"
#include "jit/kernel_footprint.hpp"

namespace {

template <typename Read>
void expect_error_at_most(Read&& read) {
  try {
    read();
  } catch (const arfuse::Error&) {}
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> file(data, data + size);
  expect_error_at_most([&] {
    // The arithmetic on what was read: blocks per SM and the tools' description, at a block size
    // taken from the input; any count that passed the reader must not overflow or divide by zero.
    const arfuse::jit::KernelFootprint footprint = arfuse::jit::kernel_footprint(file);
    const int threads = 1 + (size > 0 ? data[0] : 0) * 4;
    const int dynamic_shared = size > 1 ? data[1] * 1024 : 0;
    for (const char* target : {"sm_80", "sm_90", "sm_120"}) {
      arfuse::jit::nvidia_resident_blocks(arfuse::Target::parse(target), threads, footprint, dynamic_shared);
      arfuse::jit::describe(arfuse::Target::parse(target), threads, footprint);
    }
    arfuse::jit::describe(arfuse::Target::parse("gfx942"), threads, footprint);
  });
  expect_error_at_most([&] { arfuse::jit::elf_code_sections(file); });
  expect_error_at_most([&] { arfuse::jit::elf_notes(file); });
  expect_error_at_most([&] { arfuse::jit::elf_symbols(file); });
  return 0;
}
