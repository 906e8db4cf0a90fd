// Builds JS errors from core Errors. The JS VmmError class is handed over once by the TS layer (setErrorClass);
// until then a plain Error with the same fields is thrown.
#pragma once

#include <napi.h>

#include "kvm/result.h"

namespace kvmts::bind {

// Remembers the JS constructor used for VmmError. Called from JS: setErrorClass(VmmError).
Napi::Value JS_SetErrorClass(const Napi::CallbackInfo& info);

// Makes a JS error object: message `<op>: <CODE>` with fields code, errno, syscall.
Napi::Error MakeVmmError(Napi::Env env, const Error& error);

// Frees the stored constructor reference (cleanup hook).
void ResetErrorClass();

}  // namespace kvmts::bind
