#include "napi/dirty_log_worker.h"

#include <utility>

#include "napi/errors.h"

namespace kvmts::bind {
namespace {

struct DirtyBaton {
  std::shared_ptr<vmm::Machine> machine;
  vmm::DirtySnapshot snapshot;
  Error error;
  bool ok = false;
};

class CollectDirtyWorker : public Napi::AsyncWorker {
 public:
  CollectDirtyWorker(Napi::Env env, std::shared_ptr<vmm::Machine> machine)
      : Napi::AsyncWorker(env, "kvt-collect-dirty"), deferred_(Napi::Promise::Deferred::New(env)) {
    baton_.machine = std::move(machine);
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    auto snap = baton_.machine->CollectDirty();
    if (snap.ok()) {
      baton_.snapshot = std::move(snap.value());
      baton_.ok = true;
    } else {
      baton_.error = snap.error();
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (baton_.ok) {
      deferred_.Resolve(DirtySnapshotToJs(env, baton_.snapshot));
    } else {
      deferred_.Reject(MakeVmmError(env, baton_.error).Value());
    }
    baton_.machine.reset();
  }

 private:
  DirtyBaton baton_;
  Napi::Promise::Deferred deferred_;
};

}  // namespace

Napi::Array DirtySnapshotToJs(Napi::Env env, const vmm::DirtySnapshot& snap) {
  Napi::Array out = Napi::Array::New(env, snap.size());
  for (size_t i = 0; i < snap.size(); ++i) {
    const auto& r = snap[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("baseGpa", Napi::BigInt::New(env, static_cast<uint64_t>(r.base.value)));
    o.Set("pages", Napi::Number::New(env, static_cast<double>(r.bitmap.pages())));
    o.Set("dirtyPages", Napi::Number::New(env, static_cast<double>(r.bitmap.Count())));
    o.Set("bitmap", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t*>(r.bitmap.words()),
                                                r.bitmap.word_count() * sizeof(uint64_t)));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

Napi::Value CollectDirtyAsync(Napi::Env env, std::shared_ptr<vmm::Machine> machine) {
  auto* worker = new CollectDirtyWorker(env, std::move(machine));
  Napi::Promise promise = worker->Promise();
  worker->Queue();  // the worker deletes itself after OnOK/OnError
  return promise;
}

}  // namespace kvmts::bind
