/**
 * Follows one key of one ConfigMap, as KubeVirt's components follow the `ca-bundle` of ConfigMap `kubevirt-ca`
 * (its `KubeVirtCAConfigMap` informer): a list and watch narrowed by `fieldSelector=metadata.name=<name>`, so an RBAC
 * rule with `resourceNames: [<name>]` is all the reader needs, and a change reaches it as soon as the API server
 * sends it (a mounted ConfigMap volume lags by the kubelet's sync period).
 */
import type { Logger } from "pino";
import { resourceClient } from "../client/resource-client.ts";
import type { RestTransport } from "../client/rest-client.ts";
import { CORE_V1 } from "../core-v1.ts";
import type { KubeObject } from "../types.ts";
import { Informer } from "./informer.ts";

/** What {@link watchConfigMapKey} follows and whom it tells. */
export interface ConfigMapKeyOptions {
  readonly transport: RestTransport;
  readonly namespace: string;
  readonly name: string;
  readonly key: string;
  readonly logger: Logger;
  /** Called with each new value (not again for the same one); undefined once the object or its key is gone. */
  readonly onChange?: (value: string | undefined) => void;
}

/** A running {@link watchConfigMapKey}. */
export interface ConfigMapKeyWatch {
  /** The value seen last (undefined before the first list, or when absent). */
  current(): string | undefined;
  /** Resolves with the first value the key has; waits while the ConfigMap or the key is missing. */
  firstValue(): Promise<string>;
  /** Calls `listener` with each later value the key takes (a key or object that goes away is not reported). */
  subscribe(listener: (value: string) => void): void;
  stop(): void;
}

/** Starts following `namespace/name`'s `key`. */
export function watchConfigMapKey(o: ConfigMapKeyOptions): ConfigMapKeyWatch {
  const informer = new Informer<KubeObject & { data?: Record<string, string> }>({
    client: resourceClient(o.transport, CORE_V1.configMaps),
    logger: o.logger,
    namespace: o.namespace,
    selector: { fieldSelector: `metadata.name=${o.name}` },
  });
  let value: string | undefined;
  const waiters: ((v: string) => void)[] = [];
  const listeners: ((v: string) => void)[] = [];
  const seen = (next: string | undefined): void => {
    if (next === value) return;
    value = next;
    o.onChange?.(next);
    if (next === undefined) return;
    for (const w of waiters.splice(0)) w(next);
    for (const l of listeners) l(next);
  };
  const keyValue = (cm: KubeObject & { data?: Record<string, string> }): string | undefined =>
    cm.metadata?.name === o.name ? cm.data?.[o.key] : undefined;
  informer.addHandlers({
    onAdd: (cm) => seen(keyValue(cm)),
    onUpdate: (_old, cm) => seen(keyValue(cm)),
    onDelete: () => seen(undefined),
  });
  informer.start();
  return {
    current: () => value,
    firstValue: () =>
      value !== undefined ? Promise.resolve(value) : new Promise<string>((resolve) => waiters.push(resolve)),
    subscribe: (listener) => {
      listeners.push(listener);
    },
    stop: () => informer.stop(),
  };
}
