/**
 * The cache-mutation guard (KubeVirt `SanityExecute`): deep-freezes every object in the given stores before a
 * reconcile, so a controller that changes a cached object instead of a `structuredClone` throws a TypeError and
 * the test fails.
 */
import type { ObjectKey } from "@kvt/api";
import type { KubeObject, Reconciler, Result, Store } from "@kvt/kube";
import { trace } from "@opentelemetry/api";
import { pino } from "pino";

/** Freezes `value` and everything reachable from it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  return value;
}

/** Runs `reconciler.reconcile(key)` with every object of `stores` deep-frozen, and a silent logger and no-op span. */
export async function reconcileWithGuard(
  reconciler: Reconciler,
  key: ObjectKey,
  stores: readonly Store<KubeObject>[] | readonly Pick<Store<KubeObject>, "list">[],
): Promise<Result> {
  for (const store of stores) for (const obj of store.list()) deepFreeze(obj);
  const span = trace.getTracer("test").startSpan("reconcile");
  try {
    return await reconciler.reconcile(key, { logger: pino({ level: "silent" }), reconcileId: "test", span });
  } finally {
    span.end();
  }
}
