// [cpu] The entry parser under random and structured mutation: it never crashes, never
// allocates what a header merely claims, and accepts only the unchanged entry.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "cache/entry_file.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::cache;

namespace {

CacheEntry random_entry(std::mt19937& rng) {
  CacheEntry e;
  for (auto& b : e.key) b = std::uint8_t(rng());
  e.lowered_name = "_Z" + std::to_string(rng() % 100000) + "kernel";
  e.metadata = R"({"spec":"token_quant/h2048/bf16/sm_90","n":)" + std::to_string(rng()) + "}";
  e.payload.resize(rng() % 3000);
  for (auto& b : e.payload) b = std::uint8_t(rng());
  return e;
}

template <typename T>
void put_field(std::vector<std::uint8_t>& bytes, size_t offset, T value) {
  if (bytes.size() >= offset + sizeof(T)) std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Size fields set to values at every boundary: 0, 1, the true value +-1, the largest values of
// their types, and values whose 64-bit sum with the others wraps to the true file size.
std::vector<std::vector<std::uint8_t>> boundary_mutations(const std::vector<std::uint8_t>& good) {
  std::vector<std::vector<std::uint8_t>> out;
  std::uint32_t name = 0, metadata = 0;
  std::uint64_t payload = 0;
  std::memcpy(&name, good.data() + 12, 4);
  std::memcpy(&metadata, good.data() + 16, 4);
  std::memcpy(&payload, good.data() + 24, 8);
  const std::uint64_t size = good.size();
  for (std::uint64_t v :
       {std::uint64_t(0), std::uint64_t(1), std::uint64_t(name) - 1, std::uint64_t(name) + 1, std::uint64_t(0x7fffffff),
        std::uint64_t(0xffffffff), kMaxLoweredNameBytes, kMaxLoweredNameBytes + 1}) {
    auto m = good;
    put_field(m, 12, std::uint32_t(v));
    out.push_back(m);
    m = good;
    put_field(m, 16, std::uint32_t(v));
    out.push_back(m);
  }
  for (std::uint64_t v : {std::uint64_t(0), payload - 1, payload + 1, size, kMaxPayloadBytes, kMaxPayloadBytes + 1,
                          std::uint64_t(1) << 63, std::numeric_limits<std::uint64_t>::max(),
                          std::uint64_t(size - 128 - 0xffffffffull - metadata) /* wraps */}) {
    auto m = good;
    put_field(m, 24, v);
    out.push_back(m);
    m = good;  // with a huge name as well, so the true sum wraps exactly to the file size
    put_field(m, 12, std::uint32_t(0xffffffff));
    put_field(m, 24, std::uint64_t(size - 128 - 0xffffffffull - metadata));
    out.push_back(m);
  }
  for (size_t cut : {size_t(0), size_t(1), size_t(127), size_t(128), size_t(129), good.size() - 1}) {
    out.emplace_back(good.begin(), good.begin() + long(std::min(cut, good.size())));
  }
  auto longer = good;
  longer.push_back(0);
  out.push_back(longer);
  return out;
}

std::vector<std::uint8_t> random_mutation(const std::vector<std::uint8_t>& good, std::mt19937& rng) {
  auto m = good;
  switch (rng() % 6) {
    case 0:  // bit flips anywhere
      for (unsigned n = 1 + rng() % 4; n > 0; --n) m[rng() % m.size()] ^= std::uint8_t(1u << (rng() % 8));
      break;
    case 1:  // random bytes in the header
      for (unsigned n = 1 + rng() % 8; n > 0; --n) m[rng() % 128] = std::uint8_t(rng());
      break;
    case 2:  // truncated
      m.resize(rng() % m.size());
      break;
    case 3:  // extended
      for (unsigned n = 1 + rng() % 64; n > 0; --n) m.push_back(std::uint8_t(rng()));
      break;
    case 4:  // one size field random
      put_field(m, std::vector<size_t>{12, 16}[rng() % 2], std::uint32_t(rng()));
      break;
    default:  // the 64-bit payload size random, high bits included
      put_field(m, 24, (std::uint64_t(rng()) << 32) | rng());
      break;
  }
  return m;
}

void require_verdict(const std::vector<std::uint8_t>& mutated, const std::vector<std::uint8_t>& good,
                     const CacheEntry& original) {
  CacheEntry e;
  std::string problem;
  const bool ok = deserialize(mutated, e, problem);
  if (mutated == good) {
    REQUIRE(ok);
  } else {
    INFO("problem: " << problem);
    REQUIRE_FALSE(ok);
    REQUIRE_FALSE(problem.empty());
  }
  if (ok) REQUIRE((e.key == original.key && e.payload == original.payload && e.lowered_name == original.lowered_name));
}

}  // namespace

TEST_CASE("entry parser fuzz: 12,000 random and boundary mutations in memory, 1,200 on disk", "[cpu][cache][fuzz]") {
  auto rng = test::fresh_rng();
  int cases = 0;
  for (int round = 0; round < 200; ++round) {
    const CacheEntry original = random_entry(rng);
    const auto good = serialize(original);
    for (const auto& m : boundary_mutations(good)) require_verdict(m, good, original), ++cases;
    for (int i = 0; i < 30; ++i) require_verdict(random_mutation(good, rng), good, original), ++cases;
  }
  CHECK(cases >= 12000);

  const std::string dir = test::fresh_dir();
  int on_disk = 0;
  for (int round = 0; round < 40; ++round) {
    const CacheEntry original = random_entry(rng);
    const auto good = serialize(original);
    auto mutations = boundary_mutations(good);
    for (int i = 0; i < 10; ++i) mutations.push_back(random_mutation(good, rng));
    mutations.push_back(good);
    for (const auto& m : mutations) {
      const std::string path = dir + "/entry";
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          .write(reinterpret_cast<const char*>(m.data()), std::streamsize(m.size()));
      CacheEntry e;
      std::string problem;
      const int folder = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      REQUIRE(folder >= 0);
      const ReadOutcome outcome = read_entry_at(folder, "entry", e, problem);
      ::close(folder);
      INFO("problem: " << problem);
      REQUIRE((outcome == ReadOutcome::ok) == (m == good));
      ++on_disk;
    }
  }
  CHECK(on_disk >= 1200);
}
