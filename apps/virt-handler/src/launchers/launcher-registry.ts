/**
 * Every launcher on this node, found as KubeVirt's virt-handler finds them: through the kubelet's pods directory,
 * each launcher pod's `sockets` emptyDir holding its `launcher-sock` (launcher-rpc podSocketPath:
 * `<pods dir>/<pod uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock`), plus any directories of launchers
 * run by hand (`launcher-<key>.sock`). A restarted handler re-adopts running launchers without touching their
 * guests: it only reads `/v1/info` and follows `/v1/events`. Every pod directory is looked at (not only the VMIs'
 * activePods, as KubeVirt's FindSocketOnHost does), so a launcher whose VMI status does not name its pod yet (a
 * migration target) or no longer does is found too; `/v1/info` says whose it is.
 *
 * ```
 *  scan (a socket created in a watched dir; every scanIntervalMs as a safety net)
 *       --new launcher-*.sock--> info() --ok--> tracked: follow the event stream
 *                                                           `--refused--> ignored until the next scan (stale file)
 *                                                           `--no answer in time--> tried again (a busy launcher)
 *  tracked --domain/migration event--> info updated, onChange(vmiUid)
 *  tracked --stream ended or broke---> kept as `gone` with its last info, onChange(vmiUid)
 * ```
 * The last report of a launcher that went away is kept (marked gone) so its final state (Shutdown, Crashed,
 * Migrated) is never lost between the event and the next reconcile; it is dropped after `goneTtlMs`.
 * `synced` (the first scan is done: "no launcher for this VMI" is then a fact the VMI may fail on) waits until every
 * socket found has answered or refused: a launcher slow to answer on a loaded node is not a dead one. Only a socket
 * that answers nothing for `adoptDeadlineMs` is given up on.
 * The directories are watched (inotify: the pods directory and each pod's sockets directory), so a launcher that
 * starts listening is adopted at once rather than at the next periodic scan (on average half an interval later: the
 * largest wait of a VMI's start on an idle node). A pod's sockets directory exists before its launcher starts (the
 * kubelet sets volumes up first), so the scan that a new pod directory triggers, or the next periodic one, watches
 * it in time.
 */
import { existsSync, type FSWatcher, readdirSync, readFileSync, watch } from "node:fs";
import { join } from "node:path";
import {
  type DomainInfo,
  isLauncherSocketName,
  isPodUid,
  LAUNCHER_SOCKET_NAME,
  LauncherClient,
  type LauncherEvent,
  LauncherRpcError,
  podSocketDir,
} from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";

/** How soon a socket that did not answer is tried again (besides the periodic scan). */
const ADOPT_RETRY_MS = 100;

/** One launcher as the handler sees it. */
export interface LauncherView {
  readonly socketPath: string;
  readonly client: LauncherClient;
  /** Its latest report. */
  info: DomainInfo;
  /** Its socket went away (the process exited). */
  gone: boolean;
  /** Its event stream broke while its process lives: being followed again (logged once per outage). */
  reconnecting?: boolean;
  goneAt?: number;
}

/** Options for {@link LauncherRegistry}. */
export interface LauncherRegistryOptions {
  /** The kubelet's pods directory (KubeVirt mounts /var/lib/kubelet/pods at /pods): launcher pods' sockets. */
  readonly podsDir?: string;
  /** Directories of launchers run by hand (`launcher-<key>.sock`), if any. */
  readonly socketDirs?: readonly string[];
  readonly logger: Logger;
  /** Called with the VMI uid whenever a launcher of that VMI changed (new, event, gone). */
  readonly onChange: (vmiUid: string) => void;
  readonly scanIntervalMs?: number;
  readonly goneTtlMs?: number;
  /** How long the first scan waits for sockets that neither answer nor refuse (default 60 s). */
  readonly adoptDeadlineMs?: number;
}

/** What adopting one socket found. */
type AdoptOutcome = "tracked" | "refused" | "slow";

/** Tracks the launchers on this node. */
export class LauncherRegistry {
  readonly #o: LauncherRegistryOptions;
  readonly #views = new Map<string, LauncherView>();
  readonly #probing = new Set<string>();
  readonly #abort = new AbortController();
  #timer: ReturnType<typeof setInterval> | undefined;
  #synced = false;
  readonly #watchers = new Map<string, FSWatcher>();
  /** The scan in progress (watch events during it ask for one more after it). */
  #scanning: Promise<void> | undefined;
  #rescan = false;
  /** The launcher pods' sockets directories the last scan found. */
  #podSocketDirs: readonly string[] = [];

  constructor(options: LauncherRegistryOptions) {
    this.#o = options;
  }

  /** True once the first scan finished: from then on "no launcher" is a fact. */
  get synced(): boolean {
    return this.#synced;
  }

  /** Scans once (awaited, so re-adoption completes before reconciling), then keeps scanning. */
  async start(): Promise<void> {
    this.#watchDirs();
    const deadline = Date.now() + (this.#o.adoptDeadlineMs ?? 60_000);
    for (;;) {
      const slow = await this.scan();
      if (slow.length === 0) break;
      if (Date.now() > deadline) {
        this.#o.logger.warn({ sockets: slow }, "launchers that never answered; treating them as gone");
        break;
      }
      this.#o.logger.info({ sockets: slow }, "launchers slow to answer; waiting before reconciling");
      await new Promise((r) => setTimeout(r, 200));
    }
    this.#synced = true;
    this.#timer = setInterval(() => {
      this.#watchDirs(); // a directory that did not exist yet
      this.#scanSoon();
    }, this.#o.scanIntervalMs ?? 1000);
    this.#timer.unref();
  }

  /** Stops scanning and following event streams (the launchers keep running). */
  stop(): void {
    clearInterval(this.#timer);
    for (const w of this.#watchers.values()) w.close();
    this.#watchers.clear();
    this.#abort.abort();
  }

  /**
   * Watches every directory that exists and is not watched yet (the pods directory, each pod's sockets directory
   * the last scan found, the hand-run socket directories), and stops watching pods' directories that went away.
   */
  #watchDirs(): void {
    if (this.#abort.signal.aborted) return;
    const podsDir = this.#o.podsDir;
    const wanted = new Set([...(podsDir ? [podsDir] : []), ...(this.#o.socketDirs ?? []), ...this.#podSocketDirs]);
    for (const [dir, watcher] of this.#watchers) {
      if (wanted.has(dir) || !podsDir || !dir.startsWith(`${podsDir}/`)) continue;
      watcher.close(); // its pod is gone
      this.#watchers.delete(dir);
    }
    for (const dir of wanted) {
      if (this.#watchers.has(dir)) continue;
      try {
        const watcher = watch(dir, (_event, name) => {
          // A new pod directory (its sockets directory follows), or a launcher socket.
          if (dir === podsDir || (name && isSocketName(String(name)))) this.#scanSoon();
        });
        watcher.on("error", () => {
          // The directory went away: forget the watcher; the periodic scan sets a new one up when it is back.
          watcher.close();
          this.#watchers.delete(dir);
        });
        watcher.unref();
        this.#watchers.set(dir, watcher);
      } catch {
        // Not there yet (it appears with the first launcher): the periodic scan retries.
      }
    }
  }

  /** Scans now, or once more right after the scan in progress (which may have listed the directory too early). */
  #scanSoon(): void {
    if (this.#scanning) {
      this.#rescan = true;
      return;
    }
    this.#scanning = this.scan()
      .then(() => undefined)
      .catch((error: unknown) => this.#o.logger.warn({ err: error }, "launcher scan failed; retrying"))
      .finally(() => {
        this.#scanning = undefined;
        if (this.#rescan) {
          this.#rescan = false;
          this.#scanSoon();
        }
      });
  }

  /** The launchers serving VMI `uid` on this node, newest report first. */
  forVmi(uid: string): LauncherView[] {
    return [...this.#views.values()].filter((v) => v.info.vmi.uid === uid);
  }

  /** Every tracked launcher. */
  all(): LauncherView[] {
    return [...this.#views.values()];
  }

  /**
   * Lists the socket directories and starts tracking new launchers; forgets long-gone ones. Resolves with the sockets
   * that neither answered nor refused in time (busy launchers, tried again later).
   */
  async scan(): Promise<string[]> {
    const found: string[] = [];
    for (const dir of this.#o.socketDirs ?? []) {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        continue; // the directory appears with the first launcher
      }
      for (const name of names) if (isLauncherSocketName(name)) found.push(join(dir, name));
    }
    if (this.#o.podsDir) {
      const pods = podLauncherSockets(this.#o.podsDir);
      this.#podSocketDirs = pods.socketDirs;
      this.#watchDirs();
      found.push(...pods.sockets);
    }
    // New sockets, and sockets of launchers that went away and came back (a restarted container of the same pod).
    const fresh = found.filter((p) => (this.#views.get(p)?.gone ?? true) && !this.#probing.has(p));
    // Sockets another scan is still asking (the retry after a slow answer): not answered yet, so not absent either.
    const asked = found.filter((p) => (this.#views.get(p)?.gone ?? true) && this.#probing.has(p));
    const outcomes = await Promise.all(fresh.map(async (p) => ({ p, outcome: await this.#adopt(p) })));
    const ttl = this.#o.goneTtlMs ?? 5 * 60_000;
    for (const [path, view] of this.#views) {
      if (view.gone && Date.now() - (view.goneAt ?? 0) > ttl) this.#views.delete(path);
    }
    const slow = outcomes.filter((o) => o.outcome === "slow").map((o) => o.p);
    return [...slow, ...asked.filter((p) => !this.#views.has(p) || this.#views.get(p)?.gone === true)];
  }

  async #adopt(socketPath: string): Promise<AdoptOutcome> {
    this.#probing.add(socketPath);
    const client = new LauncherClient(socketPath, { timeoutMs: 5000 });
    try {
      const info = await client.info({ timeoutMs: 2000 });
      const view: LauncherView = { socketPath, client, info, gone: false };
      this.#views.set(socketPath, view);
      this.#o.logger.info({ socket: socketPath, vmi: info.vmi, state: info.state }, "tracking launcher");
      this.#follow(view);
      this.#o.onChange(info.vmi.uid);
      return "tracked";
    } catch (error) {
      // A socket file nobody answers on is left over from a dead launcher, or one caught between bind() and
      // listen(): look once more shortly (a watch event would not come again), and at every periodic scan. One
      // that accepted the connection but did not answer in time is a busy launcher, not a dead one.
      setTimeout(() => this.#scanSoon(), ADOPT_RETRY_MS).unref();
      return error instanceof LauncherRpcError && error.code === "DeadlineExceeded" ? "slow" : "refused";
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
    const ended = (error?: unknown): void => {
      if (this.#abort.signal.aborted) return;
      if (error !== undefined && processLives(view.info.pid)) {
        // The stream broke or went silent, but the launcher process lives (busy, or a dropped connection): its guest
        // is not gone. Follow it again rather than fail its VMI; only an ended stream or a dead process is "gone".
        if (!view.reconnecting) {
          view.reconnecting = true;
          this.#o.logger.warn(
            { socket: view.socketPath, vmi: view.info.vmi, err: error },
            "launcher event stream broke; the launcher lives, following it again",
          );
        }
        setTimeout(() => this.#follow(view), FOLLOW_RETRY_MS).unref();
        return;
      }
      view.gone = true;
      view.goneAt = Date.now();
      this.#o.logger.info({ socket: view.socketPath, vmi: view.info.vmi, state: view.info.state }, "launcher gone");
      this.#o.onChange(view.info.vmi.uid);
    };
    const onEventAndLive = (event: LauncherEvent): void => {
      view.reconnecting = false;
      onEvent(event);
    };
    view.client.watchEvents(onEventAndLive, this.#abort.signal).then(
      () => ended(),
      (error: unknown) => ended(error ?? new Error("event stream failed")),
    );
  }
}

/** True for a launcher socket's file name: KubeVirt's `launcher-sock`, or a hand-run launcher's. */
function isSocketName(name: string): boolean {
  return name === LAUNCHER_SOCKET_NAME || isLauncherSocketName(name);
}

/**
 * The launcher pods under the kubelet's pods directory: each pod's `sockets` emptyDir (KubeVirt's
 * SocketDirectoryOnHost) that exists, and the `launcher-sock` files in them. A pods directory that is not there
 * yet has none.
 */
export function podLauncherSockets(podsDir: string): { socketDirs: string[]; sockets: string[] } {
  let uids: string[];
  try {
    uids = readdirSync(podsDir);
  } catch {
    return { socketDirs: [], sockets: [] };
  }
  const socketDirs: string[] = [];
  const sockets: string[] = [];
  for (const uid of uids) {
    if (!isPodUid(uid)) continue;
    const dir = podSocketDir(podsDir, uid);
    if (!existsSync(dir)) continue; // not a launcher pod, or its volumes are not set up yet
    socketDirs.push(dir);
    const socket = join(dir, LAUNCHER_SOCKET_NAME);
    if (existsSync(socket)) sockets.push(socket);
  }
  return { socketDirs, sockets };
}

/** How soon a broken event stream of a live launcher is followed again. */
const FOLLOW_RETRY_MS = 1000;

/**
 * True while process `pid` exists and has not exited (not a zombie). virt-handler shares the node's process
 * namespace with its launchers (KubeVirt's handler runs with hostPID); elsewhere the check finds nothing and a
 * broken stream counts as a gone launcher, as before.
 */
function processLives(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}
