// VmObject: the JS-facing wrapper of one vmm::Machine (a Napi::ObjectWrap created by the addon's createVm()).
// It owns the Machine and a thread-safe function that carries the machine's events (serial output, vCPU exits,
// shutdown) to JS; vCPU threads never touch Napi::Env.
//
// For the migration bindings (napi/migration*.cc): take the JS Vm handle the TS layer passes in and call
//   vmm::Machine* machine = UnwrapMachine(env, info[0]);   // nullptr (and a pending TypeError) when not a Vm
// then do the bulk work in an AsyncWorker whose Execute() uses only the Machine (its methods are thread-safe as
// documented in vmm/machine.h). The Machine lives until the JS Vm is destroyed or stopped and collected; keep a
// Napi::ObjectReference to the JS handle in the worker so it cannot be collected mid-transfer.
//
// Registering migration functions: define `void RegisterMigrationBindings(Napi::Env, Napi::Object exports)` in a
// napi/migration*.cc file; addon.cc calls it at load time when it is linked in (weak symbol).
#pragma once

#include <napi.h>

#include <memory>

#include "vmm/machine.h"

namespace kvmts::bind {

// The Machine behind a JS Vm handle, or nullptr with a TypeError thrown.
vmm::Machine* UnwrapMachine(Napi::Env env, Napi::Value handle);

// The same, shared: for work that may outlive the handle's Machine (a migration session the guest's exit or a
// vm.close() leaves mid-step keeps a stopped Machine, never a freed one). nullptr with a TypeError thrown.
std::shared_ptr<vmm::Machine> SharedMachine(Napi::Env env, Napi::Value handle);

// Defines the VmObject class on exports (createVm and the handle's methods).
void RegisterVmObject(Napi::Env env, Napi::Object exports);

// Defined by the migration bindings (napi/migration*.cc), if present.
void RegisterMigrationBindings(Napi::Env env, Napi::Object exports) __attribute__((weak));
// Defined by the Linux boot binding (napi/linux_boot.cc): loadLinux(vm, kernel, initrd, cmdline).
void RegisterLinuxBootBindings(Napi::Env env, Napi::Object exports) __attribute__((weak));

}  // namespace kvmts::bind
