#include "napi/events.h"

#include <vector>

namespace kvmts::bind {
namespace {

// Calls the JS event callback with raw napi calls: while an env shuts down (worker terminate, process exit) a
// call can fail, and node-addon-api's wrappers would then throw into a dying env, which is a fatal error. Failures
// here only mean the event is no longer wanted.
struct Args {
  napi_env env;
  std::vector<napi_value> values;
  bool ok = true;
  Args& Str(const std::string& s) {
    napi_value v = nullptr;
    ok = ok && napi_create_string_utf8(env, s.data(), s.size(), &v) == napi_ok;
    values.push_back(v);
    return *this;
  }
  Args& Num(double d) {
    napi_value v = nullptr;
    ok = ok && napi_create_double(env, d, &v) == napi_ok;
    values.push_back(v);
    return *this;
  }
  Args& Bool(bool b) {
    napi_value v = nullptr;
    ok = ok && napi_get_boolean(env, b, &v) == napi_ok;
    values.push_back(v);
    return *this;
  }
  Args& Bytes(const std::string& s) {
    napi_value v = nullptr;
    void* data = nullptr;
    ok = ok && napi_create_buffer_copy(env, s.size(), s.data(), &data, &v) == napi_ok;
    values.push_back(v);
    return *this;
  }
  void CallOn(napi_value cb) {
    napi_value undefined = nullptr, result = nullptr;
    if (!ok || napi_get_undefined(env, &undefined) != napi_ok) return;
    napi_call_function(env, undefined, cb, values.size(), values.data(), &result);
  }
};

}  // namespace

void Bridge::Post(Event* e) {
  std::shared_ptr<Bridge> self = shared_from_this();
  napi_status st = tsfn.NonBlockingCall(e, [self](Napi::Env env, Napi::Function cb, Event* ev) {
    std::unique_ptr<Event> owned(ev);
    if (env == nullptr || cb.IsEmpty()) return;
    napi_env raw = env;
    auto serial = [&] {
      if (!self->machine) return;
      std::string out;
      if (self->machine->TakeSerialOutput(&out) == 0) return;
      Args{raw, {}}.Str("serial-output").Bytes(out).CallOn(cb);
    };
    switch (ev->kind) {
      case Event::kSerial:
        serial();
        return;
      case Event::kExit:
        Args{raw, {}}.Str("vcpu-exit").Num(ev->vcpu).Str(ev->reason).Bool(ev->fatal).CallOn(cb);
        return;
      case Event::kShutdown:
        serial();  // deliver the output that preceded the shutdown first
        Args{raw, {}}.Str("shutdown").Str(ev->reason).Num(ev->code).CallOn(cb);
        return;
      case Event::kDeviceError:
        Args{raw, {}}.Str("device-error").Str(ev->device).Str(ev->reason).CallOn(cb);
        return;
    }
  });
  if (st != napi_ok) delete e;
}

}  // namespace kvmts::bind
