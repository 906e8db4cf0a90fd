// The addon's entry point: the only place that lists what JS can call. Functions bound to JS are JS_*.
#include <napi.h>

#include "kvm/system.h"
#include "napi/errors.h"
#include "napi/vm_object.h"

namespace kvmts::bind {
namespace {

// kvmApiVersion(): number. Throws VmmError (e.g. `open: ENOENT (/dev/kvm)`).
Napi::Value JS_KvmApiVersion(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto result = kvm::QueryApiVersion();
  if (!result.ok()) {
    MakeVmmError(env, result.error()).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Number::New(env, result.value());
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("kvmApiVersion", Napi::Function::New(env, JS_KvmApiVersion, "kvmApiVersion"));
  exports.Set("setErrorClass", Napi::Function::New(env, JS_SetErrorClass, "setErrorClass"));
  RegisterVmObject(env, exports);
  if (RegisterMigrationBindings) RegisterMigrationBindings(env, exports);
  if (RegisterLinuxBootBindings) RegisterLinuxBootBindings(env, exports);
  env.AddCleanupHook([] { ResetErrorClass(); });
  return exports;
}

}  // namespace kvmts::bind

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return kvmts::bind::Init(env, exports); }
NODE_API_MODULE(kvm_native, InitAddon)
