// Runs every TEST registered by the *_test.cc files linked with it. Exit code 1 when any check failed.
#include <cstdio>

#include "check.h"

int main() {
  int failed_tests = 0;
  for (const auto& c : kvt_test::Registry()) {
    int before = kvt_test::Failures();
    c.fn();
    bool ok = kvt_test::Failures() == before;
    if (!ok) failed_tests++;
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", c.name);
  }
  std::printf("%zu tests, %d failed\n", kvt_test::Registry().size(), failed_tests);
  return failed_tests ? 1 : 0;
}
