// Fallback driver when clang (libFuzzer) is not installed: replays each seed file, then mutates it (bit flips,
// byte stores, truncations, splices) with a seeded PRNG for -runs=N inputs, stopping early at -max_total_time=S
// seconds as libFuzzer does. No coverage guidance, same invariants.
#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void ReadSeed(const std::string& path, std::vector<std::vector<uint8_t>>* seeds) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return;
  std::vector<uint8_t> buf;
  int c;
  while ((c = std::fgetc(f)) != EOF) buf.push_back(static_cast<uint8_t>(c));
  std::fclose(f);
  seeds->push_back(std::move(buf));
}

int main(int argc, char** argv) {
  long runs = 2000;
  long max_seconds = 0;  // 0 = no time bound
  std::vector<std::vector<uint8_t>> seeds;
  for (int i = 1; i < argc; i++) {
    if (std::strncmp(argv[i], "-runs=", 6) == 0) {
      runs = std::atol(argv[i] + 6);
      continue;
    }
    if (std::strncmp(argv[i], "-max_total_time=", 16) == 0) {
      max_seconds = std::atol(argv[i] + 16);
      continue;
    }
    if (argv[i][0] == '-') continue;  // other libFuzzer flags are accepted and ignored
    std::vector<std::string> files;
    if (DIR* d = opendir(argv[i])) {  // a corpus directory, as libFuzzer takes it
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') files.push_back(std::string(argv[i]) + "/" + e->d_name);
      }
      closedir(d);
    } else {
      files.push_back(argv[i]);
    }
    for (const std::string& path : files) ReadSeed(path, &seeds);
  }
  if (seeds.empty()) seeds.push_back({});
  std::mt19937_64 rng(12345);
  for (auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds);
  long n = 0;
  for (; n < runs; n++) {
    if (max_seconds > 0 && (n & 255) == 0 && std::chrono::steady_clock::now() >= deadline) break;
    std::vector<uint8_t> in = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !in.empty(); e++) {
      size_t at = rng() % in.size();
      switch (rng() % 4) {
        case 0: in[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: in[at] = static_cast<uint8_t>(rng()); break;
        case 2: in.resize(at); break;
        default: {
          const auto& other = seeds[rng() % seeds.size()];
          if (!other.empty()) in.insert(in.begin() + static_cast<long>(at), other.begin(), other.begin() + static_cast<long>(rng() % other.size()));
        }
      }
    }
    LLVMFuzzerTestOneInput(in.data(), in.size());
  }
  std::printf("Done %ld runs (standalone driver)\n", n + static_cast<long>(seeds.size()));
  return 0;
}
