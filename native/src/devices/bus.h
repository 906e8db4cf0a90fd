// PioBus: port-I/O dispatch (kvmtool's ioport tree, reduced to a short list). Each device is registered for a
// port range and guarded by its own mutex, so two vCPUs touching different devices never contend.
//
//   vCPU exit KVM_EXIT_IO(port, size, dir) --> PioBus::Read/Write --> device->Read/Write(port - base, data, size)
//   no device at the port: reads see 0xff bytes (an open ISA bus), writes are dropped; the bus returns false
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace kvmts::devices {

// A device reachable through port I/O. offset is relative to the registered base; len is 1, 2 or 4.
class PioDevice {
 public:
  virtual ~PioDevice() = default;
  virtual void Read(uint16_t offset, uint8_t* data, size_t len) = 0;
  virtual void Write(uint16_t offset, const uint8_t* data, size_t len) = 0;
};

class PioBus {
 public:
  // Registers dev for ports [base, base+len). Ranges must not overlap (returns false if they do).
  bool Register(uint16_t base, uint16_t len, PioDevice* dev);
  // Dispatches; false when no device claims the port (reads then fill data with 0xff).
  bool Read(uint16_t port, uint8_t* data, size_t len);
  bool Write(uint16_t port, const uint8_t* data, size_t len);
  // The mutex guarding dev, for callers outside a vCPU exit (console input, save/restore); nullptr if unknown.
  std::mutex* LockOf(const PioDevice* dev);

 private:
  struct Entry {
    uint16_t base;
    uint16_t len;
    PioDevice* dev;
    std::unique_ptr<std::mutex> lock;
  };
  Entry* Find(uint16_t port);
  std::vector<Entry> entries_;
};

}  // namespace kvmts::devices
