// HandleExit: what to do with one KVM_RUN return (Firecracker `run_emulation`), pure apart from the Peripherals it
// is handed, so tests feed it synthetic kvm_run structs.
//
//   KVM_EXIT_IO            -> PioBus (every repetition of a string op); unclaimed ports: reads 0xff   -> kContinue
//   KVM_EXIT_MMIO          -> Peripherals::MmioRead/Write (PCI BARs); unclaimed: reads 0xff, reported
//                             (first few per vCPU), non-fatal                                          -> kContinue
//   KVM_EXIT_INTR / IRQ_WINDOW_OPEN / IOAPIC_EOI                                                     -> kContinue
//   KVM_EXIT_SHUTDOWN (triple fault), SYSTEM_EVENT shutdown/reset/crash                              -> kShutdown
//   KVM_EXIT_HLT, FAIL_ENTRY, INTERNAL_ERROR, EXCEPTION, UNKNOWN, anything else: reported as fatal    -> kFatal
// Nothing the guest does aborts the process: every path ends in an action and, when unusual, a reason string.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <string>

#include "devices/bus.h"
#include "vmm/machine.h"

namespace kvmts::vmm {

enum class ExitAction { kContinue, kShutdown, kFatal };

// What the exit handler may touch. Implemented by the machine; by fakes in tests.
class Peripherals {
 public:
  virtual ~Peripherals() = default;
  virtual devices::PioBus& bus() = 0;
  // An exit worth telling JS about (fatal ones end the machine).
  virtual void ReportExit(uint32_t vcpu, const std::string& reason, bool fatal) = 0;
  // The guest asked to stop (triple fault, system event); the machine then shuts down.
  virtual void RequestShutdown(ShutdownReason reason, uint32_t code) = 0;
  // MMIO (len 1..8): false when no device claims the address (then reads see 0xff and the exit is reported).
  virtual bool MmioRead(uint64_t /*addr*/, uint8_t* /*data*/, size_t /*len*/) { return false; }
  virtual bool MmioWrite(uint64_t /*addr*/, const uint8_t* /*data*/, size_t /*len*/) { return false; }
};

struct ExitCounters {
  uint64_t io = 0;
  uint64_t mmio = 0;
  uint64_t unclaimed_io = 0;
  uint64_t reported = 0;  // non-fatal reports sent (capped by kMaxReports)
};
inline constexpr uint64_t kMaxReports = 16;

// Human-readable name of an exit reason: "KVM_EXIT_IO", or "KVM_EXIT_<n>".
std::string ExitReasonName(uint32_t reason);

ExitAction HandleExit(uint32_t vcpu, kvm_run* run, Peripherals& p, ExitCounters& counters);

}  // namespace kvmts::vmm
