// VmObject: see vm_object.h. Events: napi/events.h. The thread-safe function keeps the event loop alive only while
// the guest runs (Ref on start/resume, Unref on stop/shutdown/close).
#include "napi/vm_object.h"

#include <errno.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "napi/errors.h"
#include "napi/dirty_log_worker.h"
#include "napi/events.h"

namespace kvmts::bind {
namespace {

class VmObject;
std::mutex g_live_mu;
std::set<VmObject*> g_live;  // for the env cleanup hook

struct AddonData {
  Napi::FunctionReference ctor;
};

class VmObject : public Napi::ObjectWrap<VmObject> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit VmObject(const Napi::CallbackInfo& info);
  ~VmObject() override;
  vmm::Machine* machine() { return machine_.get(); }
  std::shared_ptr<vmm::Machine> shared_machine() { return machine_; }
  void Close();

 private:
  bool Check(Napi::Env env);  // throws when closed
  Napi::Value Throw(Napi::Env env, const Error& e) {
    MakeVmmError(env, e).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Value LoadElf(const Napi::CallbackInfo& info);
  Napi::Value Start(const Napi::CallbackInfo& info);
  Napi::Value Pause(const Napi::CallbackInfo& info);
  Napi::Value Resume(const Napi::CallbackInfo& info);
  Napi::Value Stop(const Napi::CallbackInfo& info);
  Napi::Value CloseJs(const Napi::CallbackInfo& info);
  Napi::Value State(const Napi::CallbackInfo& info);
  Napi::Value WriteSerial(const Napi::CallbackInfo& info);
  Napi::Value TakeSerialOutput(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value SaveState(const Napi::CallbackInfo& info);
  Napi::Value RestoreState(const Napi::CallbackInfo& info);
  Napi::Value StartDirtyLog(const Napi::CallbackInfo& info);
  Napi::Value CollectDirty(const Napi::CallbackInfo& info);
  Napi::Value StopDirtyLog(const Napi::CallbackInfo& info);
  Napi::Value SetCpuThrottle(const Napi::CallbackInfo& info);
  Napi::Value Regions(const Napi::CallbackInfo& info);
  Napi::Value ReadMemory(const Napi::CallbackInfo& info);
  Napi::Value WriteMemory(const Napi::CallbackInfo& info);
  void SetRef(bool on);

  std::shared_ptr<Bridge> bridge_;
  std::shared_ptr<vmm::Machine> machine_;  // shared with in-flight AsyncWorkers (dirty_log_worker.h)
  bool ref_ = false;
  Napi::Env env_;
};

Napi::Function VmObject::Define(Napi::Env env) {
  return DefineClass(env, "NativeVm",
                     {
                         InstanceMethod<&VmObject::LoadElf>("loadElf"),
                         InstanceMethod<&VmObject::Start>("start"),
                         InstanceMethod<&VmObject::Pause>("pause"),
                         InstanceMethod<&VmObject::Resume>("resume"),
                         InstanceMethod<&VmObject::Stop>("stop"),
                         InstanceMethod<&VmObject::CloseJs>("close"),
                         InstanceMethod<&VmObject::State>("state"),
                         InstanceMethod<&VmObject::WriteSerial>("writeSerial"),
                         InstanceMethod<&VmObject::TakeSerialOutput>("takeSerialOutput"),
                         InstanceMethod<&VmObject::Stats>("stats"),
                         InstanceMethod<&VmObject::SaveState>("saveState"),
                         InstanceMethod<&VmObject::RestoreState>("restoreState"),
                         InstanceMethod<&VmObject::StartDirtyLog>("startDirtyLog"),
                         InstanceMethod<&VmObject::CollectDirty>("collectDirty"),
                         InstanceMethod<&VmObject::StopDirtyLog>("stopDirtyLog"),
                         InstanceMethod<&VmObject::SetCpuThrottle>("setCpuThrottle"),
                         InstanceMethod<&VmObject::Regions>("regions"),
                         InstanceMethod<&VmObject::ReadMemory>("readMemory"),
                         InstanceMethod<&VmObject::WriteMemory>("writeMemory"),
                     });
}

// The disks argument of the constructor: an array of [path, readOnly, serial[, copyOnMigrate[, basePath]]] tuples
// (copyOnMigrate: boolean, default false = shared storage; basePath: "" or the raw base under a copy-on-write
// overlay at path); false on any other shape.
bool ParseDisks(Napi::Value value, std::vector<vmm::DiskConfig>* out) {
  if (!value.IsArray()) return false;
  Napi::Array list = value.As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); ++i) {
    Napi::Value item = list.Get(i);
    if (!item.IsArray()) return false;
    Napi::Array t = item.As<Napi::Array>();
    if (t.Length() < 3 || t.Length() > 5 || !t.Get(0u).IsString() || !t.Get(1u).IsBoolean() ||
        !t.Get(2u).IsString() || (t.Length() >= 4 && !t.Get(3u).IsBoolean()) ||
        (t.Length() == 5 && !t.Get(4u).IsString())) {
      return false;
    }
    vmm::DiskConfig d;
    d.path = t.Get(0u).As<Napi::String>().Utf8Value();
    d.read_only = t.Get(1u).As<Napi::Boolean>().Value();
    d.serial = t.Get(2u).As<Napi::String>().Utf8Value();
    d.copy_on_migrate = t.Length() >= 4 && t.Get(3u).As<Napi::Boolean>().Value();
    if (t.Length() == 5) d.base_path = t.Get(4u).As<Napi::String>().Utf8Value();
    out->push_back(std::move(d));
  }
  return true;
}

// The nics argument of the constructor: an array of [tap, mac] pairs (mac: a Uint8Array of 6); false otherwise.
bool ParseNics(Napi::Value value, std::vector<vmm::NicConfig>* out) {
  if (!value.IsArray()) return false;
  Napi::Array list = value.As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); ++i) {
    Napi::Value item = list.Get(i);
    if (!item.IsArray()) return false;
    Napi::Array t = item.As<Napi::Array>();
    if (t.Length() < 2 || t.Length() > 3 || !t.Get(0u).IsString() || !t.Get(1u).IsTypedArray()) return false;
    if (t.Length() == 3 && !t.Get(2u).IsNumber()) return false;
    Napi::TypedArray mac = t.Get(1u).As<Napi::TypedArray>();
    if (mac.TypedArrayType() != napi_uint8_array || mac.ElementLength() != 6) return false;
    vmm::NicConfig n;
    n.tap = t.Get(0u).As<Napi::String>().Utf8Value();
    Napi::Uint8Array bytes = mac.As<Napi::Uint8Array>();
    for (size_t b = 0; b < 6; ++b) n.mac[b] = bytes[b];
    // vhost: 0 off, 1 auto, 2 on (libs/vmm vm-nic.ts).
    uint32_t vhost = t.Length() == 3 ? t.Get(2u).As<Napi::Number>().Uint32Value() : 0;
    if (vhost > 2) return false;
    n.vhost = static_cast<devices::virtio::VhostMode>(vhost);
    out->push_back(std::move(n));
  }
  return true;
}

// new NativeVm(memoryBytes: number, vcpuCount: number, memfd: boolean, onEvent: Function[, linuxPlatform: boolean
// [, disks: [path, readOnly, serial][] [, nics: [tap, mac: Uint8Array(6)][]]]]). Arguments are already validated by libs/vmm; only type tags are checked
// here.
VmObject::VmObject(const Napi::CallbackInfo& info) : Napi::ObjectWrap<VmObject>(info), env_(info.Env()) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsBoolean() ||
      !info[3].IsFunction()) {
    Napi::TypeError::New(env, "NativeVm(memoryBytes, vcpuCount, memfd, onEvent)").ThrowAsJavaScriptException();
    return;
  }
  vmm::MachineConfig config;
  config.memory_bytes = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
  config.vcpu_count = info[1].As<Napi::Number>().Uint32Value();
  config.backing = info[2].As<Napi::Boolean>().Value() ? memory::Backing::kMemfd : memory::Backing::kAnonymous;
  // Optional 5th argument linuxPlatform (napi/linux_boot.cc loads the kernel): PIC/IOAPIC/PIT, UART IRQ, ACPI.
  config.linux_platform = info.Length() > 4 && info[4].IsBoolean() && info[4].As<Napi::Boolean>().Value();
  // Optional 6th argument disks: [[path: string, readOnly: boolean, serial: string], ...] (vmm/machine_virtio.cc puts
  // disk i at PCI 00:(i+1).0). libs/vmm validated them (linux-boot.ts parseDisks); only the shape is checked here.
  if (info.Length() > 5 && !info[5].IsUndefined()) {
    if (!ParseDisks(info[5], &config.disks)) {
      Napi::TypeError::New(env, "disks must be [[path: string, readOnly: boolean, serial: string, copy?: boolean], ...]")
          .ThrowAsJavaScriptException();
      return;
    }
  }
  // Optional 7th argument nics: [[tap: string, mac: Uint8Array(6)], ...] (after the disks on the PCI bus).
  // libs/vmm validated them (vm-nic.ts parseVmNics); only the shape is checked here.
  if (info.Length() > 6 && !info[6].IsUndefined()) {
    if (!ParseNics(info[6], &config.nics)) {
      Napi::TypeError::New(env, "nics must be [[tap: string, mac: Uint8Array(6), vhost?: 0 | 1 | 2], ...]").ThrowAsJavaScriptException();
      return;
    }
  }
  bridge_ = std::make_shared<Bridge>();
  auto machine = vmm::Machine::Create(config, bridge_.get());
  if (!machine.ok()) {
    MakeVmmError(env, machine.error()).ThrowAsJavaScriptException();
    return;
  }
  machine_ = std::move(machine.value());
  bridge_->machine = machine_.get();
  bridge_->tsfn = Napi::ThreadSafeFunction::New(env, info[3].As<Napi::Function>(), "kvt-vm-events", 0, 1);
  bridge_->tsfn.Unref(env);
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live.insert(this);
}

VmObject::~VmObject() {
  Close();
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live.erase(this);
}

void VmObject::Close() {
  if (machine_) {
    machine_->Stop();  // joins the vCPU threads: no event is posted after this
    bridge_->machine = nullptr;
    machine_.reset();
  }
  if (bridge_ && bridge_->tsfn) {
    bridge_->tsfn.Release();
    bridge_->tsfn = Napi::ThreadSafeFunction();
  }
}

void VmObject::SetRef(bool on) {
  if (!bridge_ || !bridge_->tsfn || on == ref_) return;
  if (on) bridge_->tsfn.Ref(env_);
  else bridge_->tsfn.Unref(env_);
  ref_ = on;
}

bool VmObject::Check(Napi::Env env) {
  if (machine_) return true;
  MakeVmmError(env, Error{EBADF, "vm", "the VM is closed"}).ThrowAsJavaScriptException();
  return false;
}

#define KVT_STATUS(expr)                          \
  do {                                            \
    Status st_ = (expr);                          \
    if (!st_.ok()) return Throw(env, st_.error()); \
  } while (0)

Napi::Value VmObject::LoadElf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  if (info.Length() < 2 || !info[0].IsBuffer() || !info[1].IsString()) {
    Napi::TypeError::New(env, "loadElf(image: Buffer, cmdline: string)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto image = info[0].As<Napi::Buffer<uint8_t>>();
  KVT_STATUS(machine_->LoadElf(image.Data(), image.Length(), info[1].As<Napi::String>().Utf8Value()));
  return env.Undefined();
}

Napi::Value VmObject::Start(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  KVT_STATUS(machine_->Start());
  SetRef(true);
  return env.Undefined();
}

Napi::Value VmObject::Pause(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  KVT_STATUS(machine_->Pause());
  return env.Undefined();
}

Napi::Value VmObject::Resume(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  KVT_STATUS(machine_->Resume());
  SetRef(true);
  return env.Undefined();
}

Napi::Value VmObject::Stop(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (machine_) machine_->Stop();
  SetRef(false);
  return env.Undefined();
}

Napi::Value VmObject::CloseJs(const Napi::CallbackInfo& info) {
  SetRef(false);
  Close();
  return info.Env().Undefined();
}

Napi::Value VmObject::State(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!machine_) return Napi::String::New(env, "closed");
  vmm::MachineState s = machine_->state();
  if (s == vmm::MachineState::kStopped) SetRef(false);
  return Napi::String::New(env, vmm::MachineStateName(s));
}

Napi::Value VmObject::WriteSerial(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  if (info.Length() < 1 || !info[0].IsBuffer()) {
    Napi::TypeError::New(env, "writeSerial(data: Buffer)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto data = info[0].As<Napi::Buffer<uint8_t>>();
  machine_->WriteSerialInput(data.Data(), data.Length());
  return env.Undefined();
}

// takeSerialOutput(): Buffer. The output not yet delivered as an event, taken now (pause/stop use it so every
// byte written before they returned has been seen).
Napi::Value VmObject::TakeSerialOutput(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string out;
  if (machine_) machine_->TakeSerialOutput(&out);
  return Napi::Buffer<char>::Copy(env, out.data(), out.size());
}

Napi::Value VmObject::Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  vmm::MachineStats s = machine_->stats();
  Napi::Object o = Napi::Object::New(env);
  o.Set("exits", Napi::Number::New(env, static_cast<double>(s.exits)));
  o.Set("ioExits", Napi::Number::New(env, static_cast<double>(s.io_exits)));
  o.Set("mmioExits", Napi::Number::New(env, static_cast<double>(s.mmio_exits)));
  o.Set("serialBytesOut", Napi::Number::New(env, static_cast<double>(s.serial_bytes_out)));
  o.Set("serialBytesIn", Napi::Number::New(env, static_cast<double>(s.serial_bytes_in)));
  o.Set("serialBytesDropped", Napi::Number::New(env, static_cast<double>(s.serial_bytes_dropped)));
  o.Set("kicks", Napi::Number::New(env, static_cast<double>(s.kicks)));
  o.Set("dirtyLogCollections", Napi::Number::New(env, static_cast<double>(s.dirty_log_collections)));
  o.Set("diskRequests", Napi::Number::New(env, static_cast<double>(s.disk_requests)));
  o.Set("diskReadBytes", Napi::Number::New(env, static_cast<double>(s.disk_read_bytes)));
  o.Set("diskWriteBytes", Napi::Number::New(env, static_cast<double>(s.disk_write_bytes)));
  o.Set("diskErrors", Napi::Number::New(env, static_cast<double>(s.disk_errors)));
  o.Set("diskBroken", Napi::Number::New(env, static_cast<double>(s.disk_broken)));
  o.Set("netRxFrames", Napi::Number::New(env, static_cast<double>(s.net_rx_frames)));
  o.Set("netRxBytes", Napi::Number::New(env, static_cast<double>(s.net_rx_bytes)));
  o.Set("netTxFrames", Napi::Number::New(env, static_cast<double>(s.net_tx_frames)));
  o.Set("netTxBytes", Napi::Number::New(env, static_cast<double>(s.net_tx_bytes)));
  o.Set("netErrors", Napi::Number::New(env, static_cast<double>(s.net_errors)));
  o.Set("netBroken", Napi::Number::New(env, static_cast<double>(s.net_broken)));
  o.Set("netVhost", Napi::Number::New(env, static_cast<double>(s.net_vhost)));
  o.Set("netVhostFallbacks", Napi::Number::New(env, static_cast<double>(s.net_vhost_fallbacks)));
  o.Set("irqfdRoutes", Napi::Number::New(env, static_cast<double>(s.irqfd_routes)));
  o.Set("irqfdFailures", Napi::Number::New(env, static_cast<double>(s.irqfd_failures)));
  Napi::Array seconds = Napi::Array::New(env, s.vcpu_seconds.size());
  for (size_t i = 0; i < s.vcpu_seconds.size(); ++i) seconds.Set(static_cast<uint32_t>(i), s.vcpu_seconds[i]);
  o.Set("vcpuSeconds", seconds);
  return o;
}

Napi::Value VmObject::SaveState(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  auto blob = machine_->SaveState();
  if (!blob.ok()) return Throw(env, blob.error());
  return Napi::Buffer<uint8_t>::Copy(env, blob.value().data(), blob.value().size());
}

Napi::Value VmObject::RestoreState(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  if (info.Length() < 1 || !info[0].IsBuffer()) {
    Napi::TypeError::New(env, "restoreState(blob: Buffer)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto blob = info[0].As<Napi::Buffer<uint8_t>>();
  KVT_STATUS(machine_->RestoreState(blob.Data(), blob.Length()));
  return env.Undefined();
}

Napi::Value VmObject::StartDirtyLog(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  KVT_STATUS(machine_->StartDirtyLog());
  return env.Undefined();
}

Napi::Value VmObject::StopDirtyLog(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  KVT_STATUS(machine_->StopDirtyLog());
  return env.Undefined();
}

// collectDirty(): Promise<[{ baseGpa: bigint, pages, dirtyPages, bitmap: Buffer }]> (one u64 word per 64 pages,
// little-endian), collected on the thread pool.
Napi::Value VmObject::CollectDirty(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  return CollectDirtyAsync(env, machine_);
}

Napi::Value VmObject::SetCpuThrottle(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "setCpuThrottle(percent: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  machine_->SetCpuThrottle(info[0].As<Napi::Number>().Uint32Value());
  return env.Undefined();
}

// regions(): [{ baseGpa: bigint, sizeBytes: number }]
Napi::Value VmObject::Regions(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  const auto& regions = machine_->memory().regions();
  Napi::Array out = Napi::Array::New(env, regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("baseGpa", Napi::BigInt::New(env, static_cast<uint64_t>(regions[i].base.value)));
    o.Set("sizeBytes", Napi::Number::New(env, static_cast<double>(regions[i].size_bytes)));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

// readMemory(gpa: bigint, length: number): Buffer (a copy; bounds-checked).
Napi::Value VmObject::ReadMemory(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  if (info.Length() < 2 || !info[0].IsBigInt() || !info[1].IsNumber()) {
    Napi::TypeError::New(env, "readMemory(gpa: bigint, length: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  bool lossless = false;
  uint64_t gpa = info[0].As<Napi::BigInt>().Uint64Value(&lossless);
  uint64_t len = static_cast<uint64_t>(info[1].As<Napi::Number>().Int64Value());
  if (!lossless || len > (1ull << 30)) return Throw(env, Error{EINVAL, "guest-memory", "bad address or length"});
  auto buf = Napi::Buffer<uint8_t>::New(env, len);
  KVT_STATUS(machine_->memory().Read(memory::Gpa(gpa), buf.Data(), len));
  return buf;
}

// writeMemory(gpa: bigint, data: Buffer): bounds-checked; the pages count as dirty (VMM-written).
Napi::Value VmObject::WriteMemory(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Check(env)) return env.Undefined();
  if (info.Length() < 2 || !info[0].IsBigInt() || !info[1].IsBuffer()) {
    Napi::TypeError::New(env, "writeMemory(gpa: bigint, data: Buffer)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  bool lossless = false;
  uint64_t gpa = info[0].As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) return Throw(env, Error{EINVAL, "guest-memory", "bad address"});
  auto data = info[1].As<Napi::Buffer<uint8_t>>();
  KVT_STATUS(machine_->memory().Write(memory::Gpa(gpa), data.Data(), data.Length()));
  return env.Undefined();
}

}  // namespace

std::shared_ptr<vmm::Machine> SharedMachine(Napi::Env env, Napi::Value handle) {
  auto* data = env.GetInstanceData<AddonData>();
  if (!data || !handle.IsObject() || !handle.As<Napi::Object>().InstanceOf(data->ctor.Value())) {
    Napi::TypeError::New(env, "expected a NativeVm handle").ThrowAsJavaScriptException();
    return nullptr;
  }
  VmObject* vm = Napi::ObjectWrap<VmObject>::Unwrap(handle.As<Napi::Object>());
  if (!vm || !vm->machine()) {
    MakeVmmError(env, Error{EBADF, "vm", "the VM is closed"}).ThrowAsJavaScriptException();
    return nullptr;
  }
  return vm->shared_machine();
}

vmm::Machine* UnwrapMachine(Napi::Env env, Napi::Value handle) { return SharedMachine(env, handle).get(); }

void RegisterVmObject(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = VmObject::Define(env);
  auto* data = new AddonData();
  data->ctor = Napi::Persistent(ctor);
  env.SetInstanceData<AddonData>(data);
  exports.Set("NativeVm", ctor);
  // Env teardown (process exit, worker exit): stop every guest of this env and release its resources.
  napi_env raw = env;
  env.AddCleanupHook([raw] {
    std::set<VmObject*> mine;
    {
      std::lock_guard<std::mutex> lock(g_live_mu);
      mine = g_live;
    }
    for (VmObject* vm : mine) {
      if (static_cast<napi_env>(vm->Env()) == raw) vm->Close();
    }
  });
}

}  // namespace kvmts::bind
