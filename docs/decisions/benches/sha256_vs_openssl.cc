// Measures SHA-256 and HMAC-SHA-256 throughput of native/src/migration/sha256.cc against OpenSSL's libcrypto on one
// 64 MiB buffer (best of 5), for docs/decisions/0005-sha256-hmac-in-cpp.md. Build and run from the repository root:
//   g++ -O2 -std=c++17 -Inative/src docs/decisions/benches/sha256_vs_openssl.cc native/src/migration/sha256.cc \
//       -lcrypto -o /tmp/sha256-bench && /tmp/sha256-bench
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "migration/sha256.h"

namespace {

constexpr size_t kBytes = 64u << 20;

template <typename F>
double BestMiBps(F&& hash) {
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    hash();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (kBytes / s / (1 << 20) > best) best = kBytes / s / (1 << 20);
  }
  return best;
}

}  // namespace

int main() {
  std::vector<unsigned char> data(kBytes);
  for (size_t i = 0; i < kBytes; ++i) data[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  const unsigned char key[32] = {1, 2, 3};
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;

  kvmts::migration::Digest ours{};
  double ours_sha = BestMiBps([&] { ours = kvmts::migration::Sha256Of(data.data(), data.size()); });
  double ssl_sha = BestMiBps([&] { EVP_Digest(data.data(), data.size(), out, &out_len, EVP_sha256(), nullptr); });
  bool same = std::memcmp(ours.data(), out, 32) == 0;
  double ours_hmac = BestMiBps([&] { ours = kvmts::migration::HmacSha256(key, sizeof key, data.data(), data.size()); });
  double ssl_hmac =
      BestMiBps([&] { HMAC(EVP_sha256(), key, sizeof key, data.data(), data.size(), out, &out_len); });
  same = same && std::memcmp(ours.data(), out, 32) == 0;
  std::printf(
      "{\"area\":\"sha256\",\"bytes\":%zu,\"oursSha256MiBps\":%.0f,\"opensslSha256MiBps\":%.0f,"
      "\"oursHmacMiBps\":%.0f,\"opensslHmacMiBps\":%.0f,\"digestsMatch\":%s}\n",
      kBytes, ours_sha, ssl_sha, ours_hmac, ssl_hmac, same ? "true" : "false");
  return same ? 0 : 1;
}
