// The event bridge from a Machine's vCPU threads to JS (STYLE §4: vCPU threads never touch Napi::Env):
//
//   vCPU thread                         JS thread (event loop)
//   Machine -> Bridge::OnSerialOutput   ----NonBlockingCall---->  drain Machine::TakeSerialOutput
//           -> Bridge::OnVcpuExit                                 -> onEvent("serial-output", Buffer)
//           -> Bridge::OnShutdown                                 -> onEvent("vcpu-exit", vcpu, reason, fatal)
//                                                                 -> onEvent("shutdown", reason, code)
// The Bridge is shared (shared_ptr) by its VmObject and every queued call, so a call that arrives after close()
// finds machine == nullptr instead of a dangling pointer.
#pragma once

#include <napi.h>

#include <memory>
#include <string>

#include "vmm/machine.h"

namespace kvmts::bind {

struct Event {
  enum Kind { kSerial, kExit, kShutdown, kDeviceError } kind;
  uint32_t vcpu = 0;
  std::string reason;
  bool fatal = false;
  uint32_t code = 0;
  std::string device;  // kDeviceError: e.g. "virtio-blk 00:01.0"
};

// Implements MachineEvents by queueing calls on a thread-safe function.
struct Bridge : public vmm::MachineEvents, public std::enable_shared_from_this<Bridge> {
  vmm::Machine* machine = nullptr;  // touched on the JS thread only; nullptr once closed
  Napi::ThreadSafeFunction tsfn;
  void Post(Event* e);
  void OnSerialOutput() override { Post(new Event{Event::kSerial, 0, std::string(), false, 0, std::string()}); }
  void OnVcpuExit(uint32_t vcpu, const std::string& reason, bool fatal) override {
    Post(new Event{Event::kExit, vcpu, reason, fatal, 0, std::string()});
  }
  void OnShutdown(vmm::ShutdownReason reason, uint32_t code) override {
    Post(new Event{Event::kShutdown, 0, vmm::ShutdownReasonName(reason), false, code, std::string()});
  }
  void OnDeviceError(const std::string& device, const std::string& reason) override {
    Post(new Event{Event::kDeviceError, 0, reason, false, 0, device});
  }
};

}  // namespace kvmts::bind
