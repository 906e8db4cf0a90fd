#include "devices/bus.h"

#include <cstring>

namespace kvmts::devices {

bool PioBus::Register(uint16_t base, uint16_t len, PioDevice* dev) {
  for (const auto& e : entries_) {
    if (base < e.base + e.len && e.base < base + len) return false;
  }
  entries_.push_back(Entry{base, len, dev, std::make_unique<std::mutex>()});
  return true;
}

PioBus::Entry* PioBus::Find(uint16_t port) {
  for (auto& e : entries_) {
    if (port >= e.base && port < e.base + e.len) return &e;
  }
  return nullptr;
}

std::mutex* PioBus::LockOf(const PioDevice* dev) {
  for (auto& e : entries_) {
    if (e.dev == dev) return e.lock.get();
  }
  return nullptr;
}

bool PioBus::Read(uint16_t port, uint8_t* data, size_t len) {
  Entry* e = Find(port);
  if (!e) {
    std::memset(data, 0xff, len);
    return false;
  }
  std::lock_guard<std::mutex> guard(*e->lock);
  e->dev->Read(static_cast<uint16_t>(port - e->base), data, len);
  return true;
}

bool PioBus::Write(uint16_t port, const uint8_t* data, size_t len) {
  Entry* e = Find(port);
  if (!e) return false;
  std::lock_guard<std::mutex> guard(*e->lock);
  e->dev->Write(static_cast<uint16_t>(port - e->base), data, len);
  return true;
}

}  // namespace kvmts::devices
