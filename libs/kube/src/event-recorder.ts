/**
 * Records core/v1 Events about objects (client-go `record.EventRecorder`). Writes are asynchronous and never fail
 * the caller; a repeat of the same (object, type, reason, message) within 10 minutes bumps `count` on the
 * existing Event instead of creating a new one.
 */
import type { Logger } from "pino";
import type { ResourceClient } from "./client/resource-client.ts";
import type { CoreEvent, KubeObject } from "./types.ts";

/** What controllers call; the fake recorder in @kvt/testing implements the same. */
export interface EventSink {
  /** Records `reason` (CamelCase, e.g. `SuccessfulCreate`) with a human `message` on `obj`. */
  event(obj: KubeObject, type: "Normal" | "Warning", reason: string, message: string): void;
}

/** Options for {@link EventRecorder}. */
export interface EventRecorderOptions {
  readonly events: Pick<ResourceClient<CoreEvent>, "create" | "mergePatch">;
  /** `source.component`, e.g. `virtualmachine-controller`. */
  readonly component: string;
  readonly logger: Logger;
  /** `source.host`. */
  readonly host?: string;
}

const AGGREGATE_MS = 10 * 60_000;
const MAX_TRACKED = 4096;

/** Writes Events through the API. */
export class EventRecorder implements EventSink {
  readonly #o: EventRecorderOptions;
  readonly #recent = new Map<string, { name: string; namespace: string; count: number; at: number }>();
  readonly #inflight = new Set<Promise<void>>();
  #seq = 0;

  constructor(options: EventRecorderOptions) {
    this.#o = options;
  }

  event(obj: KubeObject, type: "Normal" | "Warning", reason: string, message: string): void {
    const p = this.#write(obj, type, reason, message).finally(() => this.#inflight.delete(p));
    this.#inflight.add(p);
  }

  /** Resolves when every event recorded so far has been written (or has failed). */
  async flush(): Promise<void> {
    await Promise.all([...this.#inflight]);
  }

  async #write(obj: KubeObject, type: "Normal" | "Warning", reason: string, message: string): Promise<void> {
    const meta = obj.metadata ?? {};
    const namespace = meta.namespace || "default";
    const now = new Date().toISOString();
    const key = `${meta.uid ?? meta.name}\u0000${type}\u0000${reason}\u0000${message}`;
    const seen = this.#recent.get(key);
    try {
      if (seen && Date.now() - seen.at < AGGREGATE_MS) {
        seen.count++;
        seen.at = Date.now();
        await this.#o.events.mergePatch(seen.namespace, seen.name, { count: seen.count, lastTimestamp: now });
        return;
      }
      const name = `${meta.name ?? "unknown"}.${(Date.now() * 1000 + (this.#seq++ % 1000)).toString(16)}`;
      const ev: CoreEvent = {
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: obj.apiVersion,
          kind: obj.kind,
          namespace: meta.namespace,
          name: meta.name,
          uid: meta.uid,
          resourceVersion: meta.resourceVersion,
        },
        reason,
        message,
        type,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: this.#o.component, host: this.#o.host },
        reportingComponent: this.#o.component,
        reportingInstance: this.#o.host ?? "",
      };
      await this.#o.events.create(ev);
      if (this.#recent.size >= MAX_TRACKED) this.#recent.delete(this.#recent.keys().next().value!);
      this.#recent.set(key, { name, namespace, count: 1, at: Date.now() });
    } catch (error) {
      // Events are best effort (as in client-go): a failed write is logged, never propagated.
      this.#o.logger.debug({ err: error, reason }, "event write failed");
    }
  }
}
