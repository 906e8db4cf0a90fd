// How many of this process's threads run SCHED_BATCH, for the tests of the virtio workers' scheduling policy (a
// worker's wake-ups must not preempt a running vCPU thread: net.h, blk.h).
#pragma once

#include <dirent.h>

#include <cstddef>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace kvt_test {

// The policy is field 41 of /proc/self/task/<tid>/stat; SCHED_BATCH is 3. A thread whose flags (field 9) have
// PF_EXITING (0x4) is not counted: pthread_join returns as soon as the thread has released its memory map, while
// its task can stay listed a moment longer (seen in the nested lane's slow L1), with its old policy.
inline size_t BatchThreads() {
  constexpr unsigned long kPfExiting = 0x4;
  size_t n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));  // from field 3 (state) on
    std::string field;
    for (int i = 3; i <= 41 && fields >> field; ++i) {
      if (i == 9 && (std::stoul(field) & kPfExiting) != 0) break;
      if (i == 41 && field == "3") n++;
    }
  }
  closedir(d);
  return n;
}

}  // namespace kvt_test
