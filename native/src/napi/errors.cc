#include "napi/errors.h"

#include <string.h>

#include <string>

namespace kvmts::bind {
namespace {

Napi::FunctionReference* g_error_class = nullptr;

std::string ErrnoCode(int err) {
  // strerrorname_np is glibc >= 2.32; fall back to the number.
  const char* name = err ? strerrorname_np(err) : nullptr;
  return name ? std::string(name) : (err ? "E" + std::to_string(err) : "EVMM");
}

}  // namespace

Napi::Value JS_SetErrorClass(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsFunction()) {
    Napi::TypeError::New(env, "setErrorClass expects a constructor").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  ResetErrorClass();
  g_error_class = new Napi::FunctionReference(Napi::Persistent(info[0].As<Napi::Function>()));
  return env.Undefined();
}

Napi::Error MakeVmmError(Napi::Env env, const Error& error) {
  std::string code = ErrnoCode(error.err);
  std::string message = error.op + ": " + code;
  if (!error.detail.empty()) message += " (" + error.detail + ")";
  Napi::Object obj;
  if (g_error_class) {
    obj = g_error_class->New({Napi::String::New(env, message)});
  } else {
    obj = Napi::Error::New(env, message).Value();
  }
  obj.Set("code", Napi::String::New(env, code));
  obj.Set("errno", Napi::Number::New(env, error.err));
  obj.Set("syscall", Napi::String::New(env, error.op));
  return Napi::Error(env, obj);
}

void ResetErrorClass() {
  delete g_error_class;
  g_error_class = nullptr;
}

}  // namespace kvmts::bind
