// libFuzzer target: the readers of a compiled kernel (ELF sections, symbols, notes and
// relocations; a cubin's .nv.info; an AMD code object's MessagePack metadata note), which the
// cache tools run on the payload of every entry. An arfuse::Error is the expected answer to a
// malformed file; any other exception, a crash or a sanitizer report is a finding. Run by
// scripts/fuzz.sh; seeds in seeds/footprint (cubins and AMD code objects arfuse compiled).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/jit/elf_file.hpp"
#include "arfuse/jit/kernel_footprint.hpp"

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
  expect_error_at_most([&] { arfuse::jit::kernel_footprint(file); });
  expect_error_at_most([&] { arfuse::jit::elf_code_sections(file); });
  expect_error_at_most([&] { arfuse::jit::elf_notes(file); });
  expect_error_at_most([&] { arfuse::jit::elf_symbols(file); });
  return 0;
}
