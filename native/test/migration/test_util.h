// Helpers of the pure C++ migration tests. TEST/CHECK/CHECK_EQ come from the native tests' one harness (check.h);
// this adds only hex conversion for digests and golden frames.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../check.h"

namespace mtest {

inline std::string Hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) {
    s.push_back(d[p[i] >> 4]);
    s.push_back(d[p[i] & 15]);
  }
  return s;
}

inline std::vector<uint8_t> Unhex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace mtest
