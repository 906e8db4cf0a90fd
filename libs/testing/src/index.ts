/** @kvt/testing: Test fakes and builders: fake client, informer and recorder, object builders, cache-mutation guard. Only tests and e2e import it. */

/** Object builders and their options. */
export {
  newMigration,
  newNode,
  newPod,
  newVm,
  newVmi,
  type Option,
  ownedBy,
  withCpus,
  withLabels,
  withMemory,
  withPhase,
  withRunning,
  withRunStrategy,
} from "./builders.ts";
/** Polling until a condition holds (integration tests and benches against a real API server). */
export { type EventuallyOptions, eventually, type NotYet } from "./eventually.ts";
/** In-memory API with recorded actions. */
export { type Action, FakeApi } from "./fake-client.ts";
/** In-memory event recorder. */
export { FakeRecorder } from "./fake-recorder.ts";
/** Informer stores filled directly. */
export { fakeStore } from "./fake-store.ts";
/** The cache-mutation guard. */
export { deepFreeze, reconcileWithGuard } from "./guard.ts";
/** KubeVirt's CRDs installed into a real API server, waited for until served. */
export { installKubeVirtCrds } from "./install-crds.ts";
/** JSON/merge patch application (as the API server does). */
export { applyJsonPatch, applyMergePatch } from "./json-patch-apply.ts";
