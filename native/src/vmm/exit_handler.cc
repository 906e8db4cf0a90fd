#include "vmm/exit_handler.h"

#include <cstdio>
#include <cstring>

namespace kvmts::vmm {

std::string ExitReasonName(uint32_t reason) {
  switch (reason) {
    case KVM_EXIT_UNKNOWN: return "KVM_EXIT_UNKNOWN";
    case KVM_EXIT_EXCEPTION: return "KVM_EXIT_EXCEPTION";
    case KVM_EXIT_IO: return "KVM_EXIT_IO";
    case KVM_EXIT_HYPERCALL: return "KVM_EXIT_HYPERCALL";
    case KVM_EXIT_DEBUG: return "KVM_EXIT_DEBUG";
    case KVM_EXIT_HLT: return "KVM_EXIT_HLT";
    case KVM_EXIT_MMIO: return "KVM_EXIT_MMIO";
    case KVM_EXIT_IRQ_WINDOW_OPEN: return "KVM_EXIT_IRQ_WINDOW_OPEN";
    case KVM_EXIT_SHUTDOWN: return "KVM_EXIT_SHUTDOWN";
    case KVM_EXIT_FAIL_ENTRY: return "KVM_EXIT_FAIL_ENTRY";
    case KVM_EXIT_INTR: return "KVM_EXIT_INTR";
    case KVM_EXIT_INTERNAL_ERROR: return "KVM_EXIT_INTERNAL_ERROR";
    case KVM_EXIT_SYSTEM_EVENT: return "KVM_EXIT_SYSTEM_EVENT";
    case KVM_EXIT_IOAPIC_EOI: return "KVM_EXIT_IOAPIC_EOI";
    default: return "KVM_EXIT_" + std::to_string(reason);
  }
}

namespace {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

ExitAction HandleIo(kvm_run* run, Peripherals& p, ExitCounters& c) {
  c.io++;
  auto& io = run->io;
  size_t size = io.size;
  if (size != 1 && size != 2 && size != 4) return ExitAction::kContinue;
  // data_offset points inside the kvm_run mapping; KVM guarantees count*size bytes there.
  auto* data = reinterpret_cast<uint8_t*>(run) + io.data_offset;
  for (uint32_t i = 0; i < io.count; ++i, data += size) {
    bool claimed = io.direction == KVM_EXIT_IO_OUT ? p.bus().Write(io.port, data, size)
                                                   : p.bus().Read(io.port, data, size);
    if (!claimed) c.unclaimed_io++;
  }
  return ExitAction::kContinue;
}

}  // namespace

ExitAction HandleExit(uint32_t vcpu, kvm_run* run, Peripherals& p, ExitCounters& c) {
  switch (run->exit_reason) {
    case KVM_EXIT_IO:
      return HandleIo(run, p, c);
    case KVM_EXIT_MMIO: {
      c.mmio++;
      size_t len = run->mmio.len <= sizeof run->mmio.data ? run->mmio.len : sizeof run->mmio.data;
      bool claimed = run->mmio.is_write ? p.MmioWrite(run->mmio.phys_addr, run->mmio.data, len)
                                        : p.MmioRead(run->mmio.phys_addr, run->mmio.data, len);
      if (claimed) return ExitAction::kContinue;
      if (!run->mmio.is_write) std::memset(run->mmio.data, 0xff, sizeof run->mmio.data);
      if (c.reported < kMaxReports) {
        c.reported++;
        p.ReportExit(vcpu,
                     std::string("KVM_EXIT_MMIO ") + (run->mmio.is_write ? "write " : "read ") +
                         Hex(run->mmio.phys_addr) + " len " + std::to_string(run->mmio.len),
                     false);
      }
      return ExitAction::kContinue;
    }
    case KVM_EXIT_INTR:
    case KVM_EXIT_IRQ_WINDOW_OPEN:
    case KVM_EXIT_IOAPIC_EOI:
      return ExitAction::kContinue;
    case KVM_EXIT_SHUTDOWN:
      p.ReportExit(vcpu, "KVM_EXIT_SHUTDOWN (triple fault)", true);
      p.RequestShutdown(ShutdownReason::kTripleFault, 0);
      return ExitAction::kShutdown;
    case KVM_EXIT_SYSTEM_EVENT: {
      uint32_t type = run->system_event.type;
      ShutdownReason reason = type == KVM_SYSTEM_EVENT_RESET ? ShutdownReason::kReset : ShutdownReason::kGuestExit;
      p.RequestShutdown(reason, type);
      return ExitAction::kShutdown;
    }
    case KVM_EXIT_FAIL_ENTRY:
      p.ReportExit(vcpu,
                   "KVM_EXIT_FAIL_ENTRY hardware_entry_failure_reason " +
                       Hex(run->fail_entry.hardware_entry_failure_reason),
                   true);
      break;
    case KVM_EXIT_INTERNAL_ERROR:
      p.ReportExit(vcpu, "KVM_EXIT_INTERNAL_ERROR suberror " + std::to_string(run->internal.suberror), true);
      break;
    default:
      p.ReportExit(vcpu, ExitReasonName(run->exit_reason), true);
      break;
  }
  p.RequestShutdown(ShutdownReason::kFatalExit, run->exit_reason);
  return ExitAction::kFatal;
}

}  // namespace kvmts::vmm
