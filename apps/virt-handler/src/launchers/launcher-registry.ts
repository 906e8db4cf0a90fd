/**
 * Every launcher on this node, found by listing the node's socket directories (so a restarted handler re-adopts
 * running launchers without touching their guests: it only reads `/v1/info` and follows `/v1/events`).
 *
 * ```
 *  scan (every scanIntervalMs) --new launcher-*.sock--> info() --ok--> tracked: follow the event stream
 *                                                           `--refused--> ignored until the next scan (stale file)
 *  tracked --domain/migration event--> info updated, onChange(vmiUid)
 *  tracked --stream ended or broke---> kept as `gone` with its last info, onChange(vmiUid)
 * ```
 * The last report of a launcher that went away is kept (marked gone) so its final state (Shutdown, Crashed,
 * Migrated) is never lost between the event and the next reconcile; it is dropped after `goneTtlMs`.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { type DomainInfo, isLauncherSocketName, LauncherClient, type LauncherEvent } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";

/** One launcher as the handler sees it. */
export interface LauncherView {
  readonly socketPath: string;
  readonly client: LauncherClient;
  /** Its latest report. */
  info: DomainInfo;
  /** Its socket went away (the process exited). */
  gone: boolean;
  goneAt?: number;
}

/** Options for {@link LauncherRegistry}. */
export interface LauncherRegistryOptions {
  readonly socketDirs: readonly string[];
  readonly logger: Logger;
  /** Called with the VMI uid whenever a launcher of that VMI changed (new, event, gone). */
  readonly onChange: (vmiUid: string) => void;
  readonly scanIntervalMs?: number;
  readonly goneTtlMs?: number;
}

/** Tracks the launchers on this node. */
export class LauncherRegistry {
  readonly #o: LauncherRegistryOptions;
  readonly #views = new Map<string, LauncherView>();
  readonly #probing = new Set<string>();
  readonly #abort = new AbortController();
  #timer: ReturnType<typeof setInterval> | undefined;
  #synced = false;

  constructor(options: LauncherRegistryOptions) {
    this.#o = options;
  }

  /** True once the first scan finished: from then on "no launcher" is a fact. */
  get synced(): boolean {
    return this.#synced;
  }

  /** Scans once (awaited, so re-adoption completes before reconciling), then keeps scanning. */
  async start(): Promise<void> {
    await this.scan();
    this.#synced = true;
    this.#timer = setInterval(() => {
      this.scan().catch((error: unknown) => this.#o.logger.warn({ err: error }, "launcher scan failed; retrying"));
    }, this.#o.scanIntervalMs ?? 1000);
    this.#timer.unref();
  }

  /** Stops scanning and following event streams (the launchers keep running). */
  stop(): void {
    clearInterval(this.#timer);
    this.#abort.abort();
  }

  /** The launchers serving VMI `uid` on this node, newest report first. */
  forVmi(uid: string): LauncherView[] {
    return [...this.#views.values()].filter((v) => v.info.vmi.uid === uid);
  }

  /** Every tracked launcher. */
  all(): LauncherView[] {
    return [...this.#views.values()];
  }

  /** Lists the socket directories and starts tracking new launchers; forgets long-gone ones. */
  async scan(): Promise<void> {
    const found: string[] = [];
    for (const dir of this.#o.socketDirs) {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        continue; // the directory appears with the first launcher
      }
      for (const name of names) if (isLauncherSocketName(name)) found.push(join(dir, name));
    }
    // New sockets, and sockets of launchers that went away and came back (a restarted container of the same pod).
    const fresh = found.filter((p) => (this.#views.get(p)?.gone ?? true) && !this.#probing.has(p));
    await Promise.all(fresh.map((p) => this.#adopt(p)));
    const ttl = this.#o.goneTtlMs ?? 5 * 60_000;
    for (const [path, view] of this.#views) {
      if (view.gone && Date.now() - (view.goneAt ?? 0) > ttl) this.#views.delete(path);
    }
  }

  async #adopt(socketPath: string): Promise<void> {
    this.#probing.add(socketPath);
    const client = new LauncherClient(socketPath, { timeoutMs: 5000 });
    try {
      const info = await client.info({ timeoutMs: 2000 });
      const view: LauncherView = { socketPath, client, info, gone: false };
      this.#views.set(socketPath, view);
      this.#o.logger.info({ socket: socketPath, vmi: info.vmi, state: info.state }, "tracking launcher");
      this.#follow(view);
      this.#o.onChange(info.vmi.uid);
    } catch {
      // A socket file nobody answers on is left over from a dead launcher; it is retried at the next scan.
    } finally {
      this.#probing.delete(socketPath);
    }
  }

  #follow(view: LauncherView): void {
    const onEvent = (event: LauncherEvent): void => {
      if (event.type === "domain") view.info = event.info;
      else if (event.type === "migration-progress" && view.info.migration?.migrationUid === event.migrationUid) {
        view.info = { ...view.info, migration: { ...view.info.migration, progress: event.progress } };
      } else if (event.type === "ping") return;
      this.#o.onChange(view.info.vmi.uid);
    };
    const ended = (): void => {
      if (this.#abort.signal.aborted) return;
      view.gone = true;
      view.goneAt = Date.now();
      this.#o.logger.info({ socket: view.socketPath, vmi: view.info.vmi, state: view.info.state }, "launcher gone");
      this.#o.onChange(view.info.vmi.uid);
    };
    view.client.watchEvents(onEvent, this.#abort.signal).then(ended, ended);
  }
}
