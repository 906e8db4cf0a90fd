// A minimal test harness for the native unit tests (no framework download): TEST(name) registers a function;
// CHECK/CHECK_EQ record failures with file:line and keep going; test_main.cc runs every test and exits non-zero
// when any check failed.
#pragma once

#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace kvt_test {

struct Case {
  const char* name;
  std::function<void()> fn;
};

inline std::vector<Case>& Registry() {
  static std::vector<Case> cases;
  return cases;
}

inline int& Failures() {
  static int failures = 0;
  return failures;
}

struct Registrar {
  Registrar(const char* name, std::function<void()> fn) { Registry().push_back({name, std::move(fn)}); }
};

// Prints integers of any width as numbers (uint8_t too), everything else as itself.
template <typename T>
auto Printable(const T& v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<long long>(v);
  } else {
    return v;
  }
}

// a == b, and for two integers of different signedness the mathematically exact comparison (C++20 cmp_equal).
template <typename A, typename B>
bool Equal(const A& a, const B& b) {
  if constexpr (std::is_integral_v<A> && std::is_integral_v<B> && std::is_signed_v<A> != std::is_signed_v<B>) {
    if constexpr (std::is_signed_v<A>) {
      return a >= 0 && static_cast<std::make_unsigned_t<A>>(a) == b;
    } else {
      return b >= 0 && a == static_cast<std::make_unsigned_t<B>>(b);
    }
  } else {
    return a == b;
  }
}

template <typename A, typename B>
void CheckEq(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
  if (Equal(a, b)) return;
  std::ostringstream os;
  os << Printable(a) << " vs " << Printable(b);
  std::fprintf(stderr, "  %s:%d: CHECK_EQ(%s, %s) failed: %s\n", file, line, ea, eb, os.str().c_str());
  Failures()++;
}

}  // namespace kvt_test

#define KVT_CAT2(a, b) a##b
#define KVT_CAT(a, b) KVT_CAT2(a, b)
#define TEST(name)                                                                   \
  static void name();                                                                \
  static kvt_test::Registrar KVT_CAT(registrar_, name)(#name, name);                 \
  static void name()
#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      kvt_test::Failures()++;                                                        \
    }                                                                                \
  } while (0)
#define CHECK_EQ(a, b) kvt_test::CheckEq((a), (b), #a, #b, __FILE__, __LINE__)
