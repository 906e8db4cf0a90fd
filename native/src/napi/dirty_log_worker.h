// CollectDirtyAsync: Machine::CollectDirty on the libuv thread pool (an AsyncWorker over a baton, sharp's pattern):
// Execute() touches only the baton (the machine, held by shared_ptr so close() cannot free it mid-collection, and
// the result); OnOK/OnError build the JS values on the JS thread.
#pragma once

#include <napi.h>

#include <memory>

#include "vmm/machine.h"

namespace kvmts::bind {

// Returns a Promise of [{ baseGpa: bigint, pages, dirtyPages, bitmap: Buffer }] (rejects with a VmmError).
Napi::Value CollectDirtyAsync(Napi::Env env, std::shared_ptr<vmm::Machine> machine);

// The JS shape of a snapshot (shared by the sync and async paths).
Napi::Array DirtySnapshotToJs(Napi::Env env, const vmm::DirtySnapshot& snap);

}  // namespace kvmts::bind
