// A minimal test harness for the pure C++ migration tests: CHECK records failures, TEST registers a case.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace mtest {

struct Case {
  const char* name;
  std::function<void()> fn;
};
inline std::vector<Case>& Registry() {
  static std::vector<Case> cases;
  return cases;
}
inline int& Failures() {
  static int n = 0;
  return n;
}
struct Register {
  Register(const char* name, std::function<void()> fn) { Registry().push_back({name, std::move(fn)}); }
};
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

#define MT_CAT2(a, b) a##b
#define MT_CAT(a, b) MT_CAT2(a, b)
#define TEST(name)                                                          \
  static void MT_CAT(test_, __LINE__)();                                    \
  static mtest::Register MT_CAT(reg_, __LINE__)(name, MT_CAT(test_, __LINE__)); \
  static void MT_CAT(test_, __LINE__)()
#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "  CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      mtest::Failures()++;                                                              \
    }                                                                                   \
  } while (0)
#define CHECK_EQ(a, b)                                                                                  \
  do {                                                                                                  \
    auto va_ = (a);                                                                                     \
    auto vb_ = (b);                                                                                     \
    if (!(va_ == vb_)) {                                                                                \
      std::fprintf(stderr, "  CHECK_EQ failed at %s:%d: %s vs %s\n", __FILE__, __LINE__, #a, #b);       \
      mtest::Failures()++;                                                                              \
    }                                                                                                   \
  } while (0)
