/**
 * client-node informers for the process-kubelet and the scheduler, with the watch's client-side inactivity timeout
 * off: a watch lasts until the API server ends it (its `timeoutSeconds`, 30-60 min, as client-go's informers do),
 * and the informer then lists and watches again.
 *
 * client-node's Watch aborts a watch that received nothing for 30 s and reports that through `done`, which restarts
 * the informer. Under Deno 2 the abort does not reach the response body of the npm `undici` fetch that client-node
 * uses, so `done` never comes and the informer stops seeing changes after its first quiet half minute (a pod created
 * later is never scheduled). Under Node it only makes every idle informer re-list twice a minute.
 */
import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  Watch,
} from "@kubernetes/client-node";

/** The longest delay a timer takes (2^31 - 1 ms, about 24.8 days); longer ones fire at once. */
const NO_TIMEOUT_MS = 2 ** 31 - 1;

/** client-node's private field holding the inactivity timeout (a test pins its name). */
export const WATCH_TIMEOUT_FIELD = "requestTimeoutMs";

/** A Watch whose connections have no client-side inactivity timeout. */
export function watchWithoutIdleTimeout(kubeConfig: KubeConfig): Watch {
  const watch = new Watch(kubeConfig);
  (watch as unknown as Record<string, number>)[WATCH_TIMEOUT_FIELD] = NO_TIMEOUT_MS;
  return watch;
}

/** Like client-node's makeInformer, on a {@link watchWithoutIdleTimeout} watch. Not started. */
export function makeInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  list: () => Promise<KubernetesListObject<T>>,
): ListWatch<T> {
  return new ListWatch<T>(path, watchWithoutIdleTimeout(kubeConfig), list, false);
}
