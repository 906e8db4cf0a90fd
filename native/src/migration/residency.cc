#include "migration/residency.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace kvmts::migration {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPresent = uint64_t{1} << 63;
constexpr uint64_t kSwapped = uint64_t{1} << 62;

bool SwapActive() {
  FILE* f = std::fopen("/proc/swaps", "r");
  if (f == nullptr) return true;
  char line[256];
  int lines = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) lines++;
  std::fclose(f);
  return lines > 1;  // header only = no swap
}

}  // namespace

ResidencyProbe::ResidencyProbe() {
  pagemap_fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  swap_active_ = SwapActive();
}

ResidencyProbe::~ResidencyProbe() {
  if (pagemap_fd_ >= 0) close(pagemap_fd_);
}

void ResidencyProbe::Populated(const uint8_t* hva, uint64_t pages, bool shared, std::vector<bool>* out) {
  out->assign(pages, true);
  // Shared memory swapped out shows in neither pagemap nor mincore reliably: read everything then.
  if (pagemap_fd_ < 0 || (shared && swap_active_)) return;
  uint64_t entries[512];
  uint64_t base = reinterpret_cast<uint64_t>(hva) / kPage;
  for (uint64_t done = 0; done < pages;) {
    uint64_t n = pages - done < 512 ? pages - done : 512;
    ssize_t r = pread(pagemap_fd_, entries, n * 8, static_cast<off_t>((base + done) * 8));
    if (r != static_cast<ssize_t>(n * 8)) return;  // leave the rest "populated"
    for (uint64_t i = 0; i < n; i++) (*out)[done + i] = (entries[i] & (kPresent | kSwapped)) != 0;
    done += n;
  }
  if (!shared) return;
  std::vector<unsigned char> vec(pages);
  if (mincore(const_cast<uint8_t*>(hva), pages * kPage, vec.data()) != 0) {
    out->assign(pages, true);
    return;
  }
  for (uint64_t i = 0; i < pages; i++) {
    if (vec[i] & 1) (*out)[i] = true;
  }
}

}  // namespace kvmts::migration
