/**
 * Test helpers for live migrations between OS processes: a forked test-peer.ts per side, its console bytes, and
 * waits on its events. Used by live-migration.test.ts (and the bench).
 */
import { type ChildProcess, fork } from "node:child_process";
import { mintMigrationCertificate } from "@kvt/certs";
import type { PeerCommand } from "./test-peer.ts";
import type { MigrationTarget, MigrationTlsIdentity } from "./types.ts";

/** An event from a peer. */
export type PeerEvent = { ev: string } & Record<string, unknown>;

/** One forked migration peer. */
export class Peer {
  readonly #child: ChildProcess;
  readonly #events: PeerEvent[] = [];
  #waiters: { pred: (e: PeerEvent) => boolean; resolve: (e: PeerEvent) => void }[] = [];
  /** Everything the guest printed while it ran in this process. */
  output = "";
  exited = false;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on("message", (m) => this.#onEvent(m as PeerEvent));
    child.on("exit", () => {
      this.exited = true;
      this.#onEvent({ ev: "exit" });
    });
  }

  /** Forks a peer and waits until it is ready. */
  static async spawn(): Promise<Peer> {
    const child = fork(new URL("./test-peer.ts", import.meta.url).pathname, [], {
      execPath: process.execPath,
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const peer = new Peer(child);
    await peer.waitFor("ready");
    return peer;
  }

  #onEvent(e: PeerEvent): void {
    if (e.ev === "serial") this.output += String(e.data);
    this.#events.push(e);
    const hit = this.#waiters.filter((w) => w.pred(e));
    this.#waiters = this.#waiters.filter((w) => !w.pred(e));
    for (const w of hit) w.resolve(e);
  }

  /** Every event of a kind received so far. */
  all(ev: string): PeerEvent[] {
    return this.#events.filter((e) => e.ev === ev);
  }

  /** Sends a command. */
  send(cmd: PeerCommand): void {
    this.#child.send(cmd);
  }

  /** Resolves with the first event named `ev` (already received or future) that satisfies `pred`. */
  waitFor(ev: string, pred: (e: PeerEvent) => boolean = () => true, timeoutMs = 60_000): Promise<PeerEvent> {
    const match = (e: PeerEvent): boolean => e.ev === ev && pred(e);
    const seen = this.#events.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${ev}`)), timeoutMs);
      this.#waiters.push({
        pred: match,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      });
    });
  }

  /** Resolves once the guest printed at least `n` lines here. */
  waitForLines(n: number, timeoutMs = 60_000): Promise<void> {
    const enough = (): boolean => this.output.split("\n").length - 1 >= n;
    if (enough()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${n} lines`)), timeoutMs);
      this.#waiters.push({
        pred: () => enough(),
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  /** Forgets past events of a kind (so waitFor sees only new ones). */
  forget(ev: string): void {
    for (let i = this.#events.length - 1; i >= 0; i--) if (this.#events[i]?.ev === ev) this.#events.splice(i, 1);
  }

  /** Sends a signal to the peer process (by pid: Deno's ChildProcess.kill does not reach a stopped child). */
  signal(sig: NodeJS.Signals): void {
    if (this.#child.pid !== undefined && !this.exited) {
      try {
        process.kill(this.#child.pid, sig);
      } catch {
        // already gone
      }
    }
  }

  /** Asks the peer to exit, kills it if it does not. */
  async close(): Promise<void> {
    if (this.exited) return;
    if (this.#child.connected) this.#child.send({ op: "exit" });
    this.signal("SIGCONT");
    const timer = setTimeout(() => this.signal("SIGKILL"), 5000);
    await this.waitFor("exit");
    clearTimeout(timer);
  }
}

/** A prepared target: where the source connects, and the source's TLS identity (false: a plain stream). */
export interface PreparedTarget {
  readonly destination: MigrationTarget;
  readonly sourceTls: MigrationTlsIdentity | false;
}

/**
 * What the two virt-handlers do around a migration, for tests and the bench: mint both launchers' per-migration
 * certificates (@kvt/certs, as the handlers do; or take `identities` minted ahead), prepare `target` with its
 * identity, then pin the source's certificate there (the handlers' exchange). `tls: false` prepares a plain stream
 * (migrations.disableTLS).
 */
export async function prepareTarget(
  target: Peer,
  memoryBytes: number,
  {
    tls = true,
    digest = false,
    identities,
  }: { tls?: boolean; digest?: boolean; identities?: MigrationIdentities } = {},
): Promise<PreparedTarget> {
  target.forget("listening");
  target.forget("trusted");
  if (!tls) {
    target.send({ op: "prepare", memoryBytes, digest, tls: false });
    return { destination: (await target.waitFor("listening")).destination as MigrationTarget, sourceTls: false };
  }
  const { source, target: mine } = identities ?? (await mintMigrationIdentities());
  target.send({ op: "prepare", memoryBytes, digest, tls: { certificate: mine.certPem, key: mine.keyPem } });
  const destination = (await target.waitFor("listening")).destination as MigrationTarget;
  target.send({ op: "trust", certificate: source.certPem });
  await target.waitFor("trusted");
  return { destination, sourceTls: { certificate: source.certPem, key: source.keyPem } };
}

/** A source's and a target's certificate and key, as their two handlers mint them for one migration. */
export interface MigrationIdentities {
  readonly source: { readonly certPem: string; readonly keyPem: string };
  readonly target: { readonly certPem: string; readonly keyPem: string };
}

/**
 * Mints both identities. Under the nested lane's TCG this takes seconds: a test mints them before its guest runs
 * (e.g. in beforeAll), or the guest may finish its lines while they are made.
 */
export async function mintMigrationIdentities(): Promise<MigrationIdentities> {
  const [source, target] = await Promise.all([
    mintMigrationCertificate("kubevirt.io:migration:test:source"),
    mintMigrationCertificate("kubevirt.io:migration:test:target"),
  ]);
  return { source, target };
}
