/**
 * Events from the in-process storage controllers (core/v1 Events, as client-go's recorder writes them), written
 * once per (object, reason, message) so a level-triggered retry does not flood the event list.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { type ResourceService, systemContext } from "../apiserver/rest/service.ts";
import type { KubeObject } from "../apiserver/types.ts";

/** Records events for one controller. */
export class EventRecorder {
  readonly #svc: ResourceService;
  readonly #component: string;
  readonly #logger: Logger;
  readonly #seen = new Set<string>();

  constructor(svc: ResourceService, component: string, logger: Logger) {
    this.#svc = svc;
    this.#component = component;
    this.#logger = logger;
  }

  /** Writes a `type` (Normal or Warning) event about `about`, unless this exact one was written already. */
  async record(about: KubeObject, type: "Normal" | "Warning", reason: string, message: string): Promise<void> {
    const key = `${about.metadata.uid ?? ""}\0${reason}\0${message}`;
    if (this.#seen.has(key)) return;
    this.#seen.add(key);
    if (this.#seen.size > 10_000) this.#seen.clear();
    const def = this.#svc.registry.lookup("", "v1", "events");
    if (!def) return;
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const namespace = about.metadata.namespace ?? "default";
    const body = {
      metadata: { name: `${about.metadata.name ?? ""}.${randomBytes(8).toString("hex")}`, namespace },
      involvedObject: {
        kind: about.kind,
        apiVersion: about.apiVersion,
        namespace: about.metadata.namespace,
        name: about.metadata.name,
        uid: about.metadata.uid,
        resourceVersion: about.metadata.resourceVersion,
      },
      reason,
      message,
      type,
      source: { component: this.#component },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      reportingComponent: this.#component,
      reportingInstance: "",
    };
    try {
      await this.#svc.create(def, "v1", namespace, body, systemContext(`system:${this.#component}`));
    } catch (err) {
      // Events are best effort (as in client-go): a lost event must not fail the reconcile that emitted it.
      this.#logger.debug({ err, reason }, "event not recorded");
    }
  }
}
