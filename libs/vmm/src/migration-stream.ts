/**
 * The typed layer over the native migration stream (native/src/napi/migration.cc): one class per side. Every
 * network or bulk step runs on a native worker thread and returns a Promise; errors are `VmmError`s naming the
 * step (`connect: ECONNREFUSED`, `migration handshake: EACCES`, `migration stream: EPROTO`).
 *
 *   source: MigrationSourceStream.connect() -> bulk() -> { collect() -> sendPending() }* -> switchOver() -> close()
 *   target: MigrationTargetStream.listen() -> accept()  (the guest runs on the target when it resolves)
 *
 * Policy (when to stop iterating, throttling, timeouts) is @kvt/migration's; this layer only moves bytes.
 */
import { withCallSite } from "./errors.ts";
import { nativeAddon } from "./native.ts";
import { nativeVmOf, type Vm } from "./vm.ts";

/** What one sending step did. */
export interface MigrationRoundStats {
  /** Wire bytes of this step, frame headers included. */
  readonly bytesSent: number;
  /** Pages sent with their data. */
  readonly dataPages: number;
  /** Pages sent as zero markers. */
  readonly zeroPages: number;
  /** Bytes of copied disks (`boot.disks[i].migrate: "copy"`) sent with data; part of bytesSent. */
  readonly diskBytes: number;
  /** Bytes of copied disks sent as zero-range markers (holes, zero blocks). */
  readonly diskZeroBytes: number;
  readonly seconds: number;
}

/** What a dirty-log collection found. */
export interface MigrationCollectStats {
  /** Bytes dirtied since the previous collection. */
  readonly newDirtyBytes: number;
  /** Bytes collected and not sent yet (what a switch-over now would send, plus what the guest dirties meanwhile):
   *  memory pages and copied-disk blocks (64 KiB granules) together. */
  readonly pendingBytes: number;
  /** The copied disks' part of pendingBytes. */
  readonly diskPendingBytes: number;
  readonly secondsSinceLast: number;
}

/** The switch-over as the source measured it. */
export interface MigrationSwitchStats {
  readonly finalRound: MigrationRoundStats;
  readonly stateBytes: number;
  /** Guest paused here until the target's confirmation that it runs there. */
  readonly downtimeMs: number;
  /** Where the downtime went (ms): vCPUs paused, final dirty log, final pages sent, machine state saved, and State +
   *  Complete -> Resumed (the target drains the socket, restores the state and starts its vCPUs). */
  readonly downtimePhases: MigrationDowntimePhases;
  /** SHA-256 (hex) of all guest RAM at switch-over, when asked for (tests). */
  readonly memoryDigest?: string;
}

/** The phases of a switch-over's downtime, in milliseconds. */
export interface MigrationDowntimePhases {
  readonly pauseMs: number;
  readonly collectMs: number;
  readonly sendMs: number;
  readonly saveMs: number;
  readonly resumeMs: number;
}

/** Totals of a source stream. */
export interface MigrationStreamTotals {
  readonly version: number;
  readonly frames: number;
  readonly bytesSent: number;
  readonly dataPages: number;
  readonly zeroPages: number;
  /** Copied-disk bytes sent with data, and as zero-range markers. */
  readonly diskBytes: number;
  readonly diskZeroBytes: number;
  /** What the TLS handshake settled; absent for a plain stream. */
  readonly tls?: MigrationTlsInfo;
}

/** A TLS stream's parameters, as the source's handshake settled them. */
export interface MigrationTlsInfo {
  /** "TLS_AES_128_GCM_SHA256". */
  readonly cipher: string;
  /** Who carries the records: the kernel (kTLS took the keys), our user-space record layer, or OpenSSL. */
  readonly records: "kernel" | "user-space" | "openssl";
  readonly kernelSend: boolean;
  readonly kernelRecv: boolean;
}

/** One side's TLS identity for a migration: its certificate and private key (PEM), minted by its virt-handler. */
export interface MigrationTlsIdentity {
  readonly certificate: string;
  readonly key: string;
}

/** The source's TLS: its identity, and the target's certificate, the only one its handshake accepts (pinned). */
export interface MigrationTlsPinned extends MigrationTlsIdentity {
  readonly peerCertificate: string;
}

/** What the target received. */
export interface MigrationTargetStats {
  readonly version: number;
  readonly frames: number;
  readonly bytesReceived: number;
  readonly dataPages: number;
  readonly zeroPages: number;
  readonly receiveSeconds: number;
  /** RestoreState + start of the vCPUs. */
  readonly restoreMs: number;
  /** Guest RAM backed by transparent huge pages after the transfer. */
  readonly hugePageBytes: number;
  /** Bytes the source announced would come with data (protocol 3 Populate hints; 0 from a version 2 source). */
  readonly hintedBytes: number;
  /** Hinted bytes a helper thread faulted in before the data reached them. */
  readonly prefaultedBytes: number;
  /** Hinted bytes in sparse 2 MiB chunks, received into 4 KiB pages instead of huge pages. */
  readonly smallPageBytes: number;
  /** Copied-disk bytes written into this side's disk files, and zeroed (holes punched) there. */
  readonly diskBytes: number;
  readonly diskZeroBytes: number;
  /** SHA-256 (hex) of all guest RAM before its vCPUs started, when asked for (tests). */
  readonly memoryDigest?: string;
}

/** Where and how the source connects. */
export interface MigrationConnectOptions {
  readonly host: string;
  readonly port: number;
  /** The per-migration secret both sides prove knowledge of (HMAC challenge) before any memory moves. */
  readonly secret: string;
  /** Bound on each blocking send/receive; a hung peer fails the step instead of hanging it. Default 10 s. */
  readonly ioTimeoutMs?: number;
  /**
   * The stream runs over TLS 1.3 with these certificates (native/src/migration/tls.h), or plain with `false`
   * (KubeVirt's migrations.disableTLS); the target must agree, or the connection is refused with a message naming
   * the setting.
   */
  readonly tls: MigrationTlsPinned | false;
}

type Handle = { readonly __migrationHandle: unique symbol };

interface MigrationBinding {
  migrationSourceConnect(
    vm: object,
    host: string,
    port: number,
    secret: string,
    ioTimeoutMs: number,
    tls: MigrationTlsPinned | false,
  ): Promise<Handle>;
  migrationSourceBulk(h: Handle, bytesPerSec: number): Promise<MigrationRoundStats>;
  migrationSourceCollect(h: Handle): Promise<MigrationCollectStats>;
  migrationSourceSendPending(h: Handle, bytesPerSec: number): Promise<MigrationRoundStats>;
  migrationSourceSwitchOver(h: Handle, bytesPerSec: number, digest: boolean): Promise<MigrationSwitchStats>;
  migrationSourceCancel(h: Handle): void;
  migrationSourceClose(h: Handle): void;
  migrationSourceTotals(h: Handle): MigrationStreamTotals;
  migrationTargetListen(vm: object, host: string, port: number): Handle;
  migrationTargetPort(h: Handle): number;
  migrationTargetAccept(
    h: Handle,
    secret: string,
    ioTimeoutMs: number,
    digest: boolean,
    tls: MigrationTlsIdentity | false,
  ): Promise<MigrationTargetStats>;
  migrationTargetTrustPeer(h: Handle, certificatePem: string): void;
  migrationTargetCancel(h: Handle): void;
}

function migrationBinding(): MigrationBinding {
  const addon = nativeAddon();
  if (typeof addon.migrationSourceConnect !== "function") {
    throw new Error("the native addon was built without the migration bindings");
  }
  return addon as unknown as MigrationBinding;
}

async function withSite<T>(p: Promise<T>, site: Error): Promise<T> {
  try {
    return await p;
  } catch (e) {
    return withCallSite(e, site);
  }
}

function checkSecret(secret: string): void {
  if (typeof secret !== "string" || secret.length < 16)
    throw new RangeError("migration secret: at least 16 characters");
}

/** The source half: sends a running guest to a target. One step at a time (await each before the next). */
export class MigrationSourceStream {
  readonly #h: Handle;
  #closed = false;

  private constructor(h: Handle) {
    this.#h = h;
  }

  /** Connects, authenticates and starts the dirty log. */
  static async connect(vm: Vm, options: MigrationConnectOptions): Promise<MigrationSourceStream> {
    checkSecret(options.secret);
    if (!Number.isInteger(options.port) || options.port <= 0 || options.port > 65535) {
      throw new RangeError(`migration port: ${options.port}`);
    }
    const b = migrationBinding();
    const p = b.migrationSourceConnect(
      nativeVmOf(vm),
      options.host,
      options.port,
      options.secret,
      options.ioTimeoutMs ?? 10_000,
      options.tls,
    );
    return new MigrationSourceStream(await withSite(p, new Error()));
  }

  /** Sends every page once (zero pages as markers, never-touched pages without reading them). */
  bulk(bytesPerSec = 0): Promise<MigrationRoundStats> {
    return withSite(migrationBinding().migrationSourceBulk(this.#h, bytesPerSec), new Error());
  }

  /** Collects the dirty log into the pending set. */
  collect(): Promise<MigrationCollectStats> {
    return withSite(migrationBinding().migrationSourceCollect(this.#h), new Error());
  }

  /** Sends the pending pages while the guest runs. */
  sendPending(bytesPerSec = 0): Promise<MigrationRoundStats> {
    return withSite(migrationBinding().migrationSourceSendPending(this.#h, bytesPerSec), new Error());
  }

  /**
   * Pauses the guest, sends the last pages and the machine state, and waits for the target's confirmation. On
   * success the guest stays paused here (stop it: it runs on the target). On failure it is already resumed here.
   * `digest` adds a SHA-256 of all RAM to the result (slow: tests only).
   */
  switchOver(bytesPerSec = 0, digest = false): Promise<MigrationSwitchStats> {
    return withSite(migrationBinding().migrationSourceSwitchOver(this.#h, bytesPerSec, digest), new Error());
  }

  /** Fails the step in flight (and every later one) promptly. */
  cancel(): void {
    migrationBinding().migrationSourceCancel(this.#h);
  }

  /** Stops the dirty log and closes the connection. Idempotent; call once no step is in flight. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    migrationBinding().migrationSourceClose(this.#h);
  }

  /** Totals so far. */
  totals(): MigrationStreamTotals {
    return migrationBinding().migrationSourceTotals(this.#h);
  }
}

/** The target half: a listener bound to a created, not started, Vm of the same memory size and vCPU count. */
export class MigrationTargetStream {
  readonly #h: Handle;
  /** The TCP port the source must connect to. */
  readonly port: number;

  private constructor(h: Handle, port: number) {
    this.#h = h;
    this.port = port;
  }

  /** Listens on host:port (0 = any free port). */
  static listen(vm: Vm, host: string, port = 0): MigrationTargetStream {
    const b = migrationBinding();
    try {
      const h = b.migrationTargetListen(nativeVmOf(vm), host, port);
      return new MigrationTargetStream(h, b.migrationTargetPort(h));
    } catch (e) {
      return withCallSite(e, new Error());
    }
  }

  /**
   * Accepts one source, receives the guest, restores and starts it, confirms. Rejects without starting it. `tls`:
   * this side's identity, the source then must present the certificate given to trustPeer() before it connected;
   * `false` for a plain stream (as the source's MigrationConnectOptions.tls). `digest` adds a SHA-256 of all RAM
   * taken before the vCPUs start (slow: tests only).
   */
  accept(
    secret: string,
    tls: MigrationTlsIdentity | false,
    ioTimeoutMs = 10_000,
    digest = false,
  ): Promise<MigrationTargetStats> {
    checkSecret(secret);
    const p = migrationBinding().migrationTargetAccept(this.#h, secret, ioTimeoutMs, digest, tls);
    return withSite(p, new Error());
  }

  /** The source's certificate (PEM): the only one the TLS handshake accepts. Throws on a certificate OpenSSL cannot
   *  read, or once a source connected. */
  trustPeer(certificatePem: string): void {
    try {
      migrationBinding().migrationTargetTrustPeer(this.#h, certificatePem);
    } catch (e) {
      withCallSite(e, new Error());
    }
  }

  /** Fails a pending accept. */
  cancel(): void {
    migrationBinding().migrationTargetCancel(this.#h);
  }
}
