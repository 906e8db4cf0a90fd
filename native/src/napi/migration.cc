// The migration bindings: source and target sessions (migration/session.h) as JS handles, every network or bulk
// step on a libuv worker thread (Napi::AsyncWorker) returning a Promise. libs/vmm/src/migration-*.ts types them.
//
//   migrationSourceConnect(vm, host, port, secret, ioTimeoutMs, tls) -> Promise<source>
//       tls: {certificate, key, peerCertificate} (PEM: this side's pair, the target's pinned certificate), or false
//       for a plain stream (KubeVirt's migrations.disableTLS)
//   migrationSourceBulk(source, bytesPerSec) / migrationSourceSendPending(source, bytesPerSec) -> Promise<Round>
//   migrationSourceCollect(source) -> Promise<Collect>   migrationSourceSwitchOver(source, bps, digest) -> Promise<Switch>
//   migrationSourceCancel(source) / migrationSourceClose(source) / migrationSourceTotals(source)   (synchronous)
//   migrationTargetListen(vm, host, port) -> target          migrationTargetPort(target) -> number
//   migrationTargetAccept(target, secret, ioTimeoutMs, digest, tls) -> Promise<TargetStats>   migrationTargetCancel(target)
//       tls: {certificate, key} (PEM), or false for a plain stream
//   migrationTargetTrustPeer(target, certificatePem)   the source's certificate, the only one the handshake accepts
#include <napi.h>

#include <functional>
#include <memory>
#include <optional>

#include "migration/session.h"
#include "napi/errors.h"
#include "napi/vm_object.h"

namespace kvmts::bind {
namespace {

using migration::SourceSession;
using migration::TargetSession;

// A session plus a strong reference to the JS Vm it drives (the Machine must outlive the session).
template <typename S>
struct Holder {
  std::shared_ptr<S> session;
  Napi::ObjectReference vm;
};

template <typename T>
class Job : public Napi::AsyncWorker {
 public:
  using Work = std::function<Result<T>()>;
  using ToJs = std::function<Napi::Value(Napi::Env, T&)>;
  Job(Napi::Env env, Napi::Object keep, Work work, ToJs to_js)
      : Napi::AsyncWorker(env, "kvt-migration"), deferred_(Napi::Promise::Deferred::New(env)),
        keep_(Napi::Persistent(keep)), work_(std::move(work)), to_js_(std::move(to_js)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override { result_.emplace(work_()); }
  void OnOK() override {
    Napi::Env env = Env();
    if (result_->ok()) {
      deferred_.Resolve(to_js_(env, result_->value()));
    } else {
      deferred_.Reject(MakeVmmError(env, result_->error()).Value());
    }
    keep_.Reset();
  }

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference keep_;
  Work work_;
  ToJs to_js_;
  std::optional<Result<T>> result_;
};

template <typename T>
Napi::Value Queue(Napi::Env env, Napi::Object keep, typename Job<T>::Work work, typename Job<T>::ToJs to_js) {
  auto* job = new Job<T>(env, keep, std::move(work), std::move(to_js));
  Napi::Promise p = job->Promise();
  job->Queue();
  return p;
}

template <typename S>
Holder<S>* HolderOf(Napi::Env env, Napi::Value v) {
  if (!v.IsExternal()) {
    Napi::TypeError::New(env, "expected a migration session handle").ThrowAsJavaScriptException();
    return nullptr;
  }
  return v.As<Napi::External<Holder<S>>>().Data();
}

template <typename S>
Napi::Value Wrap(Napi::Env env, std::shared_ptr<S> session, Napi::Object vm) {
  auto* h = new Holder<S>{std::move(session), Napi::Persistent(vm)};
  return Napi::External<Holder<S>>::New(env, h, [](Napi::Env, Holder<S>* p) { delete p; });
}

Napi::Object RoundJs(Napi::Env env, const migration::RoundStats& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("bytesSent", double(r.bytes_sent));
  o.Set("dataPages", double(r.data_pages));
  o.Set("zeroPages", double(r.zero_pages));
  o.Set("diskBytes", double(r.disk_bytes));
  o.Set("diskZeroBytes", double(r.disk_zero_bytes));
  o.Set("seconds", r.seconds);
  return o;
}

bool Args(const Napi::CallbackInfo& info, size_t n) {
  if (info.Length() < n) {
    Napi::TypeError::New(info.Env(), "missing arguments").ThrowAsJavaScriptException();
    return false;
  }
  return true;
}

// A string property of a TLS argument; sets *ok to false (a TypeError is pending) when it is missing.
std::string PemField(Napi::Env env, Napi::Object o, const char* name, bool* ok) {
  Napi::Value v = o.Get(name);
  if (*ok && (!v.IsString() || v.As<Napi::String>().Utf8Value().empty())) {
    Napi::TypeError::New(env, std::string("tls.") + name + ": a PEM string").ThrowAsJavaScriptException();
    *ok = false;
  }
  return v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
}

// The TLS argument: an object with the PEM fields, or false for a plain stream (migrations.disableTLS); anything
// else is a TypeError (the stream is TLS by default: a caller must say which). *ok false: an exception is pending.
std::optional<migration::PinnedTls> TlsArg(const Napi::CallbackInfo& info, size_t i, bool with_peer, bool* ok) {
  *ok = true;
  Napi::Env env = info.Env();
  Napi::Value v = info.Length() > i ? info[i] : env.Undefined();
  if (v.IsBoolean() && !v.As<Napi::Boolean>().Value()) return std::nullopt;
  if (!v.IsObject()) {
    Napi::TypeError::New(env, "tls: the migration's certificates, or false (migrations.disableTLS)")
        .ThrowAsJavaScriptException();
    *ok = false;
    return std::nullopt;
  }
  Napi::Object o = v.As<Napi::Object>();
  migration::PinnedTls t;
  t.me.certificate_pem = PemField(env, o, "certificate", ok);
  t.me.key_pem = PemField(env, o, "key", ok);
  if (with_peer) t.peer_certificate_pem = PemField(env, o, "peerCertificate", ok);
  if (!*ok) return std::nullopt;
  return t;
}

Napi::Value JS_SourceConnect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Args(info, 5)) return env.Undefined();
  std::shared_ptr<vmm::Machine> machine = SharedMachine(env, info[0]);
  if (machine == nullptr) return env.Undefined();
  Napi::Object vm = info[0].As<Napi::Object>();
  std::string host = info[1].ToString(), secret = info[3].ToString();
  uint16_t port = static_cast<uint16_t>(info[2].ToNumber().Uint32Value());
  uint32_t timeout = info[4].ToNumber().Uint32Value();
  bool ok = true;
  auto tls = TlsArg(info, 5, true, &ok);
  if (!ok) return env.Undefined();
  auto out = std::make_shared<std::shared_ptr<SourceSession>>();
  return Queue<bool>(
      env, vm,
      [=]() -> Result<bool> {
        auto s = SourceSession::Connect(machine, host, port, secret, timeout, tls);
        if (!s.ok()) return s.error();
        *out = std::shared_ptr<SourceSession>(std::move(s.value()));
        return true;
      },
      [out, vm_ref = std::make_shared<Napi::ObjectReference>(Napi::Persistent(vm))](Napi::Env e, bool&) {
        Napi::Value v = Wrap(e, *out, vm_ref->Value());
        vm_ref->Reset();
        return v;
      });
}

template <typename T>
Napi::Value SourceStep(const Napi::CallbackInfo& info, std::function<Result<T>(SourceSession&, uint64_t)> step,
                       std::function<Napi::Value(Napi::Env, T&)> to_js) {
  Napi::Env env = info.Env();
  if (!Args(info, 1)) return env.Undefined();
  auto* h = HolderOf<SourceSession>(env, info[0]);
  if (h == nullptr) return env.Undefined();
  uint64_t bps = info.Length() > 1 ? static_cast<uint64_t>(info[1].ToNumber().DoubleValue()) : 0;
  std::shared_ptr<SourceSession> s = h->session;
  return Queue<T>(env, h->vm.Value(), [s, step, bps]() { return step(*s, bps); }, to_js);
}

Napi::Value JS_SourceBulk(const Napi::CallbackInfo& info) {
  return SourceStep<migration::RoundStats>(
      info, [](SourceSession& s, uint64_t bps) { return s.SendBulk(bps); },
      [](Napi::Env e, migration::RoundStats& r) { return RoundJs(e, r); });
}

Napi::Value JS_SourceSendPending(const Napi::CallbackInfo& info) {
  return SourceStep<migration::RoundStats>(
      info, [](SourceSession& s, uint64_t bps) { return s.SendPending(bps); },
      [](Napi::Env e, migration::RoundStats& r) { return RoundJs(e, r); });
}

Napi::Value JS_SourceCollect(const Napi::CallbackInfo& info) {
  return SourceStep<migration::CollectStats>(
      info, [](SourceSession& s, uint64_t) { return s.Collect(); },
      [](Napi::Env e, migration::CollectStats& c) -> Napi::Value {
        Napi::Object o = Napi::Object::New(e);
        o.Set("newDirtyBytes", double(c.new_dirty_bytes));
        o.Set("pendingBytes", double(c.pending_bytes));
        o.Set("diskPendingBytes", double(c.disk_pending_bytes));
        o.Set("secondsSinceLast", c.seconds_since_last);
        return o;
      });
}

Napi::Value JS_SourceSwitchOver(const Napi::CallbackInfo& info) {
  bool digest = info.Length() > 2 && info[2].ToBoolean().Value();
  return SourceStep<migration::SwitchStats>(
      info, [digest](SourceSession& s, uint64_t bps) { return s.SwitchOver(bps, digest); },
      [](Napi::Env e, migration::SwitchStats& w) -> Napi::Value {
        Napi::Object o = Napi::Object::New(e);
        o.Set("finalRound", RoundJs(e, w.final_round));
        o.Set("stateBytes", double(w.state_bytes));
        o.Set("downtimeMs", w.downtime_ms);
        Napi::Object phases = Napi::Object::New(e);
        phases.Set("pauseMs", w.pause_ms);
        phases.Set("collectMs", w.collect_ms);
        phases.Set("sendMs", w.send_ms);
        phases.Set("saveMs", w.save_ms);
        phases.Set("resumeMs", w.resume_ms);
        o.Set("downtimePhases", phases);
        if (!w.memory_digest.empty()) o.Set("memoryDigest", w.memory_digest);
        return o;
      });
}

Napi::Value JS_SourceCancel(const Napi::CallbackInfo& info) {
  auto* h = HolderOf<SourceSession>(info.Env(), info[0]);
  if (h != nullptr) h->session->Cancel();
  return info.Env().Undefined();
}

Napi::Value JS_SourceClose(const Napi::CallbackInfo& info) {
  auto* h = HolderOf<SourceSession>(info.Env(), info[0]);
  if (h != nullptr) h->session->Close();
  return info.Env().Undefined();
}

Napi::Value JS_SourceTotals(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto* h = HolderOf<SourceSession>(env, info[0]);
  if (h == nullptr) return env.Undefined();
  const migration::OutgoingStats& t = h->session->totals();
  Napi::Object o = Napi::Object::New(env);
  o.Set("version", t.version);
  o.Set("frames", double(t.frames));
  o.Set("bytesSent", double(t.bytes));
  o.Set("dataPages", double(t.data_pages));
  o.Set("zeroPages", double(t.zero_pages));
  o.Set("diskBytes", double(t.disk_bytes));
  o.Set("diskZeroBytes", double(t.disk_zero_bytes));
  const migration::TlsInfo& tls = h->session->tls();
  if (!tls.cipher.empty()) {
    Napi::Object t = Napi::Object::New(env);
    t.Set("cipher", tls.cipher);
    t.Set("records", tls.user_space ? "user-space" : (tls.kernel_send && tls.kernel_recv) ? "kernel" : "openssl");
    t.Set("kernelSend", tls.kernel_send);
    t.Set("kernelRecv", tls.kernel_recv);
    o.Set("tls", t);
  }
  return o;
}

Napi::Value JS_TargetListen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Args(info, 3)) return env.Undefined();
  std::shared_ptr<vmm::Machine> machine = SharedMachine(env, info[0]);
  if (machine == nullptr) return env.Undefined();
  auto t = TargetSession::Listen(std::move(machine), info[1].ToString(),
                                 static_cast<uint16_t>(info[2].ToNumber().Uint32Value()));
  if (!t.ok()) {
    MakeVmmError(env, t.error()).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Wrap(env, std::shared_ptr<TargetSession>(std::move(t.value())), info[0].As<Napi::Object>());
}

Napi::Value JS_TargetPort(const Napi::CallbackInfo& info) {
  auto* h = HolderOf<TargetSession>(info.Env(), info[0]);
  if (h == nullptr) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), h->session->port());
}

Napi::Value JS_TargetAccept(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Args(info, 3)) return env.Undefined();
  auto* h = HolderOf<TargetSession>(env, info[0]);
  if (h == nullptr) return env.Undefined();
  std::shared_ptr<TargetSession> s = h->session;
  std::string secret = info[1].ToString();
  uint32_t timeout = info[2].ToNumber().Uint32Value();
  bool digest = info.Length() > 3 && info[3].ToBoolean().Value();
  bool ok = true;
  auto pinned = TlsArg(info, 4, false, &ok);
  if (!ok) return env.Undefined();
  std::optional<migration::TlsIdentity> tls;
  if (pinned) tls = pinned->me;
  return Queue<migration::TargetStats>(
      env, h->vm.Value(), [=]() { return s->Accept(secret, timeout, digest, tls); },
      [](Napi::Env e, migration::TargetStats& t) -> Napi::Value {
        Napi::Object o = Napi::Object::New(e);
        o.Set("version", t.stream.version);
        o.Set("frames", double(t.stream.frames));
        o.Set("bytesReceived", double(t.stream.bytes));
        o.Set("dataPages", double(t.stream.data_pages));
        o.Set("zeroPages", double(t.stream.zero_pages));
        o.Set("receiveSeconds", t.receive_seconds);
        o.Set("restoreMs", t.restore_ms);
        o.Set("hugePageBytes", double(t.huge_page_bytes));
        o.Set("hintedBytes", double(t.stream.hinted_bytes));
        o.Set("prefaultedBytes", double(t.stream.prefaulted_bytes));
        o.Set("smallPageBytes", double(t.stream.small_page_bytes));
        o.Set("diskBytes", double(t.stream.disk_bytes));
        o.Set("diskZeroBytes", double(t.stream.disk_zero_bytes));
        if (!t.memory_digest.empty()) o.Set("memoryDigest", t.memory_digest);
        return o;
      });
}

Napi::Value JS_TargetTrustPeer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Args(info, 2)) return env.Undefined();
  auto* h = HolderOf<TargetSession>(env, info[0]);
  if (h == nullptr) return env.Undefined();
  if (!info[1].IsString()) {
    Napi::TypeError::New(env, "the peer's certificate: a PEM string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto r = h->session->TrustPeer(info[1].As<Napi::String>().Utf8Value());
  if (!r.ok()) MakeVmmError(env, r.error()).ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value JS_TargetCancel(const Napi::CallbackInfo& info) {
  auto* h = HolderOf<TargetSession>(info.Env(), info[0]);
  if (h != nullptr) h->session->Cancel();
  return info.Env().Undefined();
}

}  // namespace

void RegisterMigrationBindings(Napi::Env env, Napi::Object exports) {
  exports.Set("migrationSourceConnect", Napi::Function::New(env, JS_SourceConnect, "migrationSourceConnect"));
  exports.Set("migrationSourceBulk", Napi::Function::New(env, JS_SourceBulk, "migrationSourceBulk"));
  exports.Set("migrationSourceCollect", Napi::Function::New(env, JS_SourceCollect, "migrationSourceCollect"));
  exports.Set("migrationSourceSendPending", Napi::Function::New(env, JS_SourceSendPending, "migrationSourceSendPending"));
  exports.Set("migrationSourceSwitchOver", Napi::Function::New(env, JS_SourceSwitchOver, "migrationSourceSwitchOver"));
  exports.Set("migrationSourceCancel", Napi::Function::New(env, JS_SourceCancel, "migrationSourceCancel"));
  exports.Set("migrationSourceClose", Napi::Function::New(env, JS_SourceClose, "migrationSourceClose"));
  exports.Set("migrationSourceTotals", Napi::Function::New(env, JS_SourceTotals, "migrationSourceTotals"));
  exports.Set("migrationTargetListen", Napi::Function::New(env, JS_TargetListen, "migrationTargetListen"));
  exports.Set("migrationTargetPort", Napi::Function::New(env, JS_TargetPort, "migrationTargetPort"));
  exports.Set("migrationTargetAccept", Napi::Function::New(env, JS_TargetAccept, "migrationTargetAccept"));
  exports.Set("migrationTargetTrustPeer", Napi::Function::New(env, JS_TargetTrustPeer, "migrationTargetTrustPeer"));
  exports.Set("migrationTargetCancel", Napi::Function::New(env, JS_TargetCancel, "migrationTargetCancel"));
}

}  // namespace kvmts::bind
