#include "memory/dirty_bitmap.h"

namespace kvmts::memory {

DirtyBitmap::DirtyBitmap(uint64_t pages) : pages_(pages), words_((pages + 63) / 64, 0) {}

void DirtyBitmap::Set(uint64_t page) {
  if (page >= pages_) return;
  __atomic_fetch_or(&words_[page / 64], uint64_t{1} << (page % 64), __ATOMIC_RELAXED);
}

void DirtyBitmap::SetRange(uint64_t first, uint64_t count) {
  if (first >= pages_) return;
  uint64_t end = (count > pages_ - first) ? pages_ : first + count;
  uint64_t p = first;
  while (p < end) {
    uint64_t bit = p % 64;
    uint64_t n = 64 - bit;
    if (n > end - p) n = end - p;
    uint64_t mask = (n == 64) ? ~uint64_t{0} : (((uint64_t{1} << n) - 1) << bit);
    __atomic_fetch_or(&words_[p / 64], mask, __ATOMIC_RELAXED);
    p += n;
  }
}

bool DirtyBitmap::Test(uint64_t page) const {
  if (page >= pages_) return false;
  return (__atomic_load_n(&words_[page / 64], __ATOMIC_RELAXED) >> (page % 64)) & 1;
}

void DirtyBitmap::SetAll() {
  Clear();
  SetRange(0, pages_);
}

void DirtyBitmap::Clear() {
  for (auto& w : words_) __atomic_store_n(&w, 0, __ATOMIC_RELAXED);
}

void DirtyBitmap::OrWords(const uint64_t* words, size_t count) {
  if (count > words_.size()) count = words_.size();
  for (size_t i = 0; i < count; ++i) {
    if (words[i]) words_[i] |= words[i];
  }
  // Never let bits beyond pages_ in; ForEachRun and Count rely on it.
  if (pages_ % 64 && !words_.empty()) words_.back() &= (uint64_t{1} << (pages_ % 64)) - 1;
}

void DirtyBitmap::TakeInto(DirtyBitmap& dst) {
  size_t n = words_.size() < dst.words_.size() ? words_.size() : dst.words_.size();
  for (size_t i = 0; i < n; ++i) {
    if (__atomic_load_n(&words_[i], __ATOMIC_RELAXED) == 0) continue;
    dst.words_[i] |= __atomic_exchange_n(&words_[i], 0, __ATOMIC_ACQ_REL);
  }
}

uint64_t DirtyBitmap::Count() const {
  uint64_t n = 0;
  for (uint64_t w : words_) n += static_cast<uint64_t>(__builtin_popcountll(w));
  return n;
}

bool DirtyBitmap::Any() const {
  for (uint64_t w : words_) {
    if (w) return true;
  }
  return false;
}

}  // namespace kvmts::memory
