#include "jit/kernel_footprint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/bounded_json.hpp"
#include "jit/elf_file.hpp"

namespace arfuse::jit {
namespace {

// .nv.info records: format byte, attribute byte, then a 16-bit value (formats 1-3) or a 16-bit
// size and that many bytes (format 4, EIFMT_SVAL). Per-function attributes are SVALs of a
// symbol index and a 32-bit value.
constexpr std::uint8_t kSizedValue = 4;
constexpr std::uint8_t kFrameSize = 0x11, kRegisterCount = 0x2f;
constexpr const char* kReservedSharedSymbol = "__nv_reservedSMEM_offset_0_alias";

std::uint32_t u32_at(const std::vector<std::uint8_t>& bytes, std::size_t at) {
  std::uint32_t v;
  std::memcpy(&v, bytes.data() + at, 4);
  return v;
}

// Attribute `attribute` of symbol `symbol` in one .nv.info section, or -1.
long function_attribute(const ElfSection& info, std::uint8_t attribute, long symbol) {
  const auto& b = info.bytes;
  for (std::size_t at = 0; at + 4 <= b.size();) {
    const std::uint8_t format = b[at], attr = b[at + 1];
    const std::size_t size = format == kSizedValue ? std::size_t(b[at + 2] | (b[at + 3] << 8)) : 0;
    if (at + 4 + size > b.size()) throw Error(fmt::format("malformed cubin: {} record past its end", info.name));
    if (format == kSizedValue && attr == attribute && size == 8 && long(u32_at(b, at + 4)) == symbol) {
      return long(u32_at(b, at + 8));
    }
    at += 4 + size;
  }
  return -1;
}

struct NvidiaLimits {
  int blocks, shared_bytes, reserved_per_block, shared_unit;
};

// The CUDA programming guide's table of compute capabilities; generations after sm_90 as sm_90.
NvidiaLimits nvidia_limits(int generation) {
  if (generation < 75) return {32, 96 * 1024, 0, 256};
  if (generation == 75) return {16, 64 * 1024, 0, 256};
  if (generation == 80) return {32, 164 * 1024, 1024, 128};
  if (generation == 86) return {16, 100 * 1024, 1024, 128};
  if (generation == 87) return {16, 164 * 1024, 1024, 128};
  if (generation == 89) return {24, 100 * 1024, 1024, 128};
  return {32, 228 * 1024, 1024, 128};
}

std::int64_t round_up(std::int64_t value, std::int64_t unit) { return (value + unit - 1) / unit * unit; }

// What any kernel of the generations modelled here can ask for; a file claiming more is
// malformed (or hostile), and its footprint unreadable rather than a wrong number.
constexpr long kMaxNvidiaRegisters = 255;              // per thread
constexpr long kMaxNvidiaLocalBytes = 512 * 1024;      // per thread
constexpr std::uint64_t kMaxSharedBytes = 256 * 1024;  // per block, both vendors (LDS included)
constexpr std::uint64_t kMaxAmdRegisters = 512;        // VGPRs or AGPRs per lane
constexpr std::uint64_t kMaxAmdScalarRegisters = 128;
constexpr std::uint64_t kMaxAmdScratchBytes = 1 << 20;  // per lane

// `value` read for `what` when it is at most `max`; else the file is malformed.
long bounded(long value, long max, const char* what) {
  if (value < 0 || value > max) throw Error(fmt::format("malformed cubin: {} {} (at most {})", value, what, max));
  return value;
}

}  // namespace

KernelFootprint cubin_footprint(const std::vector<std::uint8_t>& cubin) {
  const auto sections = elf_sections(cubin);
  const std::string info_prefix = ".nv.info.";
  std::vector<std::string> kernels;
  for (const auto& s : sections) {
    if (s.name.rfind(info_prefix, 0) == 0) kernels.push_back(s.name.substr(info_prefix.size()));
  }
  if (kernels.size() != 1) {
    throw Error(
        fmt::format("a cubin of one kernel has one .nv.info.<kernel> section; this file has {}", kernels.size()));
  }
  const std::string& kernel = kernels[0];
  const long symbol = elf_symbol_index(cubin, kernel);
  if (symbol < 0) throw Error(fmt::format("malformed cubin: no symbol for kernel {}", kernel));
  KernelFootprint f;
  for (const auto& s : sections) {
    if (s.name == ".nv.info") {
      // function_attribute: a 32-bit value, or -1 for none.
      const long registers = function_attribute(s, kRegisterCount, symbol);
      const long frame = function_attribute(s, kFrameSize, symbol);
      f.registers = int(registers < 0 ? 0 : bounded(registers, kMaxNvidiaRegisters, "registers per thread"));
      f.local_bytes = int(frame < 0 ? 0 : bounded(frame, kMaxNvidiaLocalBytes, "bytes of local memory per thread"));
    } else if (s.name == ".nv.shared." + kernel) {
      if (s.size > kMaxSharedBytes)
        throw Error(fmt::format("malformed cubin: {} bytes of shared memory (at most {})", s.size, kMaxSharedBytes));
      f.shared_bytes = int(s.size);
    }
  }
  if (f.registers == 0) throw Error(fmt::format("cubin: no register count for kernel {}", kernel));
  // From sm_80 on, ptxas places the 1 KiB each block keeps for the system at the start of the
  // kernel's shared section (the symbol below marks it); the driver's static size leaves it out.
  if (elf_symbol_index(cubin, kReservedSharedSymbol) >= 0) f.shared_bytes = std::max(0, f.shared_bytes - 1024);
  return f;
}

int nvidia_threads_per_multiprocessor(int generation) {
  if (generation == 75) return 1024;
  if (generation == 86 || generation == 87 || generation == 89) return 1536;
  return 2048;
}

int nvidia_resident_blocks(const Target& target, int threads, const KernelFootprint& footprint,
                           int dynamic_shared_bytes) {
  constexpr int kWarp = 32, kRegistersPerMultiprocessor = 64 * 1024, kRegisterUnit = 256;
  if (target.vendor() != Vendor::nvidia) {
    throw Error(fmt::format("blocks per SM are modelled for NVIDIA targets only, not {}", target.name()));
  }
  // Counts from a file are bounded by cubin_footprint; these come from callers too. In 64 bits
  // nothing below overflows, and every divisor is at least one unit.
  if (threads < 1 || threads > 1024 || footprint.registers < 0 || footprint.registers > kMaxNvidiaRegisters ||
      footprint.shared_bytes < 0 || dynamic_shared_bytes < 0 ||
      std::uint64_t(footprint.shared_bytes) + std::uint64_t(dynamic_shared_bytes) > kMaxSharedBytes) {
    throw Error(fmt::format(
        "no occupancy for {} threads with {} registers and {} + {} B of shared memory: threads must be 1 to 1024, "
        "registers 0 to {}, shared memory 0 to {} B",
        threads, footprint.registers, footprint.shared_bytes, dynamic_shared_bytes, kMaxNvidiaRegisters,
        kMaxSharedBytes));
  }
  const NvidiaLimits limits = nvidia_limits(target.generation());
  const std::int64_t warps = (threads + kWarp - 1) / kWarp;
  std::int64_t blocks =
      std::min<std::int64_t>(limits.blocks, nvidia_threads_per_multiprocessor(target.generation()) / (warps * kWarp));
  if (footprint.registers > 0) {
    const std::int64_t per_warp = round_up(std::int64_t(footprint.registers) * kWarp, kRegisterUnit);
    blocks = std::min(blocks, kRegistersPerMultiprocessor / per_warp / warps);
  }
  const std::int64_t shared = round_up(std::int64_t(footprint.shared_bytes) + dynamic_shared_bytes, limits.shared_unit);
  if (shared > 0) blocks = std::min<std::int64_t>(blocks, limits.shared_bytes / (shared + limits.reserved_per_block));
  return int(std::max<std::int64_t>(0, blocks));
}

KernelFootprint code_object_footprint(const std::vector<std::uint8_t>& code_object) {
  constexpr std::uint32_t kAmdgpuMetadata = 32;  // NT_AMDGPU_METADATA
  for (const auto& note : elf_notes(code_object)) {
    if (note.name != "AMDGPU" || note.type != kAmdgpuMetadata) continue;
    nlohmann::json metadata;
    std::string why;
    if (!parse_msgpack(note.description, metadata, why))
      throw Error(
          fmt::format("malformed AMD code object: its metadata note is not MessagePack that can be read ({})", why));
    const auto kernels = metadata.find("amdhsa.kernels");
    if (kernels == metadata.end() || !kernels->is_array() || kernels->size() != 1) {
      throw Error("an AMD code object of one kernel lists one in amdhsa.kernels; this one does not");
    }
    const auto& k = kernels->at(0);
    const auto count = [&](const char* key, std::uint64_t max) {
      const auto it = k.find(key);
      if (it == k.end()) return 0;
      if (!it->is_number_unsigned() || it->get<std::uint64_t>() > max) {
        throw Error(fmt::format("malformed AMD code object: metadata {} is not a count from 0 to {}", key, max));
      }
      return int(it->get<std::uint64_t>());
    };
    KernelFootprint f;
    f.registers = count(".vgpr_count", kMaxAmdRegisters);
    f.accumulation_registers = count(".agpr_count", kMaxAmdRegisters);
    f.scalar_registers = count(".sgpr_count", kMaxAmdScalarRegisters);
    f.shared_bytes = count(".group_segment_fixed_size", kMaxSharedBytes);
    f.local_bytes = count(".private_segment_fixed_size", kMaxAmdScratchBytes);
    if (f.registers == 0) throw Error("AMD code object: its metadata has no .vgpr_count");
    return f;
  }
  throw Error("AMD code object without an AMDGPU metadata note");
}

KernelFootprint kernel_footprint(const std::vector<std::uint8_t>& payload) {
  return elf_machine(payload) == kElfMachineAmdgpu ? code_object_footprint(payload) : cubin_footprint(payload);
}

std::string describe(const Target& target, int threads, const KernelFootprint& f) {
  if (target.vendor() == Vendor::amd) {
    const std::string scratch = f.local_bytes > 0 ? fmt::format(", {} B scratch", f.local_bytes) : "";
    return fmt::format("{} VGPRs, {} AGPRs, {} SGPRs, {} B LDS{}", f.registers, f.accumulation_registers,
                       f.scalar_registers, f.shared_bytes, scratch);
  }
  const std::string local = f.local_bytes > 0 ? fmt::format(", {} B local", f.local_bytes) : "";
  return fmt::format("{} registers, {} B shared{}, {} blocks of {} threads per SM", f.registers, f.shared_bytes, local,
                     nvidia_resident_blocks(target, threads, f), threads);
}

}  // namespace arfuse::jit
