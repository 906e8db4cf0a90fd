// sendCtrlAltDel(vm) and loadLinux(vm: NativeVm, kernel: Buffer, initrd: Buffer, cmdline: string[, uuid: string]):
// loads a bzImage and an initramfs into a VM created with linuxPlatform = true (vmm/machine_linux.cc), with `uuid`
// (canonical text) as the SMBIOS system UUID. Synchronous: copying a few MiB takes milliseconds.
// Arguments are validated by libs/vmm (linux-boot.ts); only type tags are checked here.
#include <napi.h>

#include "napi/errors.h"
#include "napi/vm_object.h"

namespace kvmts::bind {
namespace {

Napi::Value JS_LoadLinux(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool has_uuid = info.Length() > 4 && !info[4].IsUndefined();
  if (info.Length() < 4 || !info[1].IsBuffer() || !info[2].IsBuffer() || !info[3].IsString() ||
      (has_uuid && !info[4].IsString())) {
    Napi::TypeError::New(env, "loadLinux(vm, kernel: Buffer, initrd: Buffer, cmdline: string[, uuid: string])")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  vmm::Machine* machine = UnwrapMachine(env, info[0]);
  if (!machine) return env.Undefined();
  auto kernel = info[1].As<Napi::Buffer<uint8_t>>();
  auto initrd = info[2].As<Napi::Buffer<uint8_t>>();
  Status st = machine->LoadLinux(kernel.Data(), kernel.Length(), initrd.Data(), initrd.Length(),
                                 info[3].As<Napi::String>().Utf8Value(),
                                 has_uuid ? info[4].As<Napi::String>().Utf8Value() : std::string());
  if (!st.ok()) MakeVmmError(env, st.error()).ThrowAsJavaScriptException();
  return env.Undefined();
}

// sendCtrlAltDel(vm): Ctrl-Alt-Del on the guest's PS/2 keyboard; VmmError EAGAIN before the guest enabled it.
Napi::Value JS_SendCtrlAltDel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  vmm::Machine* machine = UnwrapMachine(env, info.Length() > 0 ? info[0] : env.Undefined());
  if (!machine) return env.Undefined();
  Status st = machine->SendCtrlAltDel();
  if (!st.ok()) MakeVmmError(env, st.error()).ThrowAsJavaScriptException();
  return env.Undefined();
}

}  // namespace

void RegisterLinuxBootBindings(Napi::Env env, Napi::Object exports) {
  exports.Set("loadLinux", Napi::Function::New(env, JS_LoadLinux, "loadLinux"));
  exports.Set("sendCtrlAltDel", Napi::Function::New(env, JS_SendCtrlAltDel, "sendCtrlAltDel"));
}

}  // namespace kvmts::bind
