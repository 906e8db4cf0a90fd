/**
 * How a migration's one-time secret and its launchers' TLS certificates travel between the two virt-handlers: handler
 * to handler over mutual TLS, never through the API server (so no component needs to read Secrets for it). Each
 * handler mints a fresh key pair and short-lived certificate for its own launcher (@kvt/certs
 * mintMigrationCertificate); the two swap certificates here, and each launcher then accepts exactly the peer's
 * (docs/decisions/0013, 0017). The target launcher's listener refuses any peer without the pinned certificate (TLS)
 * or that cannot prove the secret (HMAC challenge); neither appears in the VMI's status, which every VMI reader can
 * see, and the secret lives only in the memory of the target handler process.
 *
 *   target virt-handler                                          source virt-handler
 *   prepare-target -> launcher: {tls: its identity}
 *     <- {address, secret, certificate}
 *   hold(migrationUid, secret, certificate) in memory
 *   status.migrationState: targetNodeAddress + port,
 *     targetState.syncAddress = its own server's host:port  --(VMI watch)-->  plan: migrate; mint the source
 *                                                                 launcher's identity (once per migration)
 *                                                            <--  POST https://{syncAddress}/v1/namespaces/{ns}/
 *                                                                 virtualmachineinstances/{name}/migrations/{uid}/secret
 *                                                                 {"certificate": the source launcher's}
 *                                                                 client cert CN kubevirt.io:system:node:virt-handler,
 *                                                                 header X-KubeVirt-Source-Node: {its node}
 *   checks: peer CN is virt-handler's; VMI known here; {uid} is its open migration, this node its target, the
 *   header its sourceNode; the secret held by this process; (TLS) the certificate readable and current
 *   launcher.sourceCertificate(it): the target launcher's pin
 *                                                            -->  200 {"secret", "certificate"} | Status 400, 403,
 *                                                                 404, 409; the source verifies the target's
 *                                                                 certificate (KubeVirt CA, CN
 *                                                                 kubevirt.io:system:node:virt-handler), then
 *                                                                 launcher.migrate({target: {..., secret,
 *                                                                 certificate}, tls: its identity})
 *
 * Under KubeVirt's migrations.disableTLS no certificate is minted or sent: the answer is the secret alone.
 * Every handler presents the same certificate (`kubevirt-virt-handler-server-certs`, issued for server and client
 * use), so the target cannot tell one node's handler from another's by certificate: the source node check compares
 * the caller's stated node with the VMI's migrationState.sourceNode, which stops confused callers, not a handler
 * that lies. virt-api's client certificate is refused here, and the handler's on virt-api's endpoints.
 */
import type { IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { PeerCertificate } from "node:tls";
import type { VirtualMachineInstance } from "@kvt/api";
import { certificateInfo } from "@kvt/certs";
import { answerMessage, parseJson, statusError } from "@kvt/kube";

/** The CN of virt-handler's certificate (KubeVirt's `kubevirt-virt-handler-server-certs`), server and client. */
export const VIRT_HANDLER_NAME = "kubevirt.io:system:node:virt-handler";
/** The header in which the source handler names its node. */
export const SOURCE_NODE_HEADER = "x-kubevirt-source-node";
/** How long one request for the secret may take, connection and answer (ms). */
export const SECRET_REQUEST_TIMEOUT_MS = 10_000;

/** The path of a migration's secret on the target handler's server. */
export function migrationSecretPath(namespace: string, name: string, migrationUid: string): string {
  const seg = encodeURIComponent;
  return `/v1/namespaces/${seg(namespace)}/virtualmachineinstances/${seg(name)}/migrations/${seg(migrationUid)}/secret`;
}

/** Why the source could not get the secret; `permanent` when asking again cannot help (the target refused). */
export class MigrationSecretError extends Error {
  readonly permanent: boolean;
  constructor(message: string, options: { permanent: boolean; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "MigrationSecretError";
    this.permanent = options.permanent;
  }
}

/** What the target's handler hands the source's: the secret and, over TLS, the target launcher's certificate. */
export interface MigrationHandoff {
  readonly secret: string;
  /** PEM; absent under KubeVirt's migrations.disableTLS. */
  readonly certificate?: string;
}

/** Target side: pins the source launcher's certificate in the target launcher of VMI `vmiUid`. */
export type PinSourceCertificate = (vmiUid: string, migrationUid: string, certificate: string) => Promise<void>;

/** Moves migration secrets and launcher certificates between handlers. */
export interface MigrationSecrets {
  /** Target side: keep `handoff` of `migrationUid` for the source handler (replacing one from a retried prepare). */
  publish(vmi: VirtualMachineInstance, migrationUid: string, handoff: MigrationHandoff): void;
  /** Target side: whether this process holds the secret of `migrationUid`. */
  holds(migrationUid: string): boolean;
  /** Target side: forget a migration that ended. */
  release(migrationUid: string): void;
  /**
   * Source side: sends the source launcher's certificate (absent under migrations.disableTLS) to the target's
   * handler and gets the secret and the target launcher's certificate; rejects with a {@link MigrationSecretError}.
   */
  exchange(vmi: VirtualMachineInstance, migrationUid: string, sourceCertificate?: string): Promise<MigrationHandoff>;
}

/** The TLS material the handler presents and trusts (its serving pair, issued for client use too, and the CA). */
export interface PeerTls {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

/** Options of {@link HandlerMigrationSecrets}. */
export interface HandlerMigrationSecretsOptions {
  readonly nodeName: string;
  /** The current TLS material (it rotates). */
  readonly tls: () => PeerTls;
  readonly timeoutMs?: number;
}

/** {@link MigrationSecrets} between handlers: held in memory on the target, fetched over mutual TLS by the source. */
export class HandlerMigrationSecrets implements MigrationSecrets {
  readonly #o: HandlerMigrationSecretsOptions;
  /** migration uid -> { vmi uid, secret } of migrations this process prepared as their target. */
  readonly #held = new Map<string, { vmiUid: string; handoff: MigrationHandoff }>();

  constructor(options: HandlerMigrationSecretsOptions) {
    this.#o = options;
  }

  publish(vmi: VirtualMachineInstance, migrationUid: string, handoff: MigrationHandoff): void {
    this.#held.set(migrationUid, { vmiUid: vmi.metadata?.uid ?? "", handoff });
  }

  holds(migrationUid: string): boolean {
    return this.#held.has(migrationUid);
  }

  release(migrationUid: string): void {
    this.#held.delete(migrationUid);
  }

  /**
   * Target side, for the server: what the handler of `callerNode` may have for `migrationUid` of `vmi` (this
   * handler's cache entry, undefined when unknown here), after pinning `sourceCertificate` in the target launcher
   * (`pin`) when the migration runs over TLS; throws the Status to answer otherwise.
   */
  async answer(
    vmi: VirtualMachineInstance | undefined,
    migrationUid: string,
    callerNode: string,
    sourceCertificate: string | undefined,
    pin: PinSourceCertificate,
  ): Promise<MigrationHandoff> {
    const id = `VMI ${vmiName(vmi)}`;
    const ms = vmi?.status?.migrationState;
    if (!vmi?.metadata?.uid || ms?.targetNode !== this.#o.nodeName) {
      throw statusError(404, "NotFound", `${id} is not migrating to node ${this.#o.nodeName}`);
    }
    const open = ms.migrationUid === migrationUid && !ms.completed && !ms.failed;
    if (!open) throw statusError(403, "Forbidden", `migration ${migrationUid} is not the open migration of ${id}`);
    if (!callerNode || ms.sourceNode !== callerNode) {
      throw statusError(
        403,
        "Forbidden",
        `migration ${migrationUid} of ${id} comes from node ${String(ms.sourceNode)}, not "${callerNode}"`,
      );
    }
    const held = this.#held.get(migrationUid);
    if (!held || held.vmiUid !== vmi.metadata.uid) {
      throw statusError(409, "Conflict", `the target of migration ${migrationUid} is not prepared on this node yet`);
    }
    if (held.handoff.certificate === undefined) return { secret: held.handoff.secret }; // migrations.disableTLS
    if (!sourceCertificate) {
      throw statusError(
        400,
        "BadRequest",
        `migration ${migrationUid} runs over TLS: the source launcher's certificate is required (KubeVirt's migrations.disableTLS must be the same at both ends)`,
      );
    }
    checkCurrent(sourceCertificate, new Date());
    await pin(vmi.metadata.uid, migrationUid, sourceCertificate);
    return held.handoff;
  }

  async exchange(
    vmi: VirtualMachineInstance,
    migrationUid: string,
    sourceCertificate?: string,
  ): Promise<MigrationHandoff> {
    const address = vmi.status?.migrationState?.targetState?.syncAddress;
    if (!address || !/^(\[[0-9a-fA-F:.]+\]|[^\s/:@[\]]+):\d{1,5}$/.test(address)) {
      throw new MigrationSecretError(
        `the target's virt-handler has not published its address (migrationState.targetState.syncAddress: ${JSON.stringify(address ?? null)})`,
        { permanent: false },
      );
    }
    const ns = vmi.metadata?.namespace ?? "default";
    const url = new URL(`https://${address}${migrationSecretPath(ns, vmi.metadata?.name ?? "", migrationUid)}`);
    const body = JSON.stringify(sourceCertificate ? { certificate: sourceCertificate } : {});
    const { status, body: answer } = await this.#post(url, body);
    if (status === 200) {
      const handoff = parseHandoff(answer);
      if (!handoff) {
        throw new MigrationSecretError(`the target's virt-handler at ${address} sent no secret`, { permanent: true });
      }
      if (sourceCertificate && !handoff.certificate) {
        throw new MigrationSecretError(
          `the target's virt-handler at ${address} sent no certificate: its launcher expects an unencrypted stream (KubeVirt's migrations.disableTLS must be the same at both ends)`,
          { permanent: true },
        );
      }
      return handoff;
    }
    const message = `the target's virt-handler at ${address} answered ${status}: ${answerMessage(answer, 200)}`;
    // 403: it refused this caller or this migration; 400 and 405: we do not speak its protocol. Others may pass
    // (404: its cache has not seen the migration yet; 409: it restarted and prepares the target again; 5xx).
    throw new MigrationSecretError(message, { permanent: status === 400 || status === 403 || status === 405 });
  }

  /** One POST with the handler's client certificate, the target checked by CA and CN, bounded by the timeout. */
  #post(url: URL, body: string): Promise<{ status: number; body: string }> {
    const { cert, key, ca } = this.#o.tls();
    const timeoutMs = this.#o.timeoutMs ?? SECRET_REQUEST_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const req = httpsRequest(url, {
        method: "POST",
        cert,
        key,
        ca,
        headers: {
          [SOURCE_NODE_HEADER]: this.#o.nodeName,
          accept: "application/json",
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
        // One certificate serves every node's pod IP: the target is checked by its CN, as virt-api checks it.
        checkServerIdentity: (_host: string, peer: PeerCertificate) =>
          peer.subject?.CN === VIRT_HANDLER_NAME
            ? undefined
            : new Error(`its certificate is for "${String(peer.subject?.CN)}", not "${VIRT_HANDLER_NAME}"`),
        signal: AbortSignal.timeout(timeoutMs),
      });
      req.on("response", (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > 64 * 1024) req.destroy(new Error("its answer is over 64 KiB"));
          else chunks.push(chunk);
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", (error) => reject(unreachable(url, error)));
      });
      req.on("error", (error) => reject(unreachable(url, error, timeoutMs)));
      req.end(body);
    });
  }
}

function vmiName(vmi: VirtualMachineInstance | undefined): string {
  return `${vmi?.metadata?.namespace ?? ""}/${vmi?.metadata?.name ?? ""}`;
}

function unreachable(url: URL, error: Error, timeoutMs?: number): MigrationSecretError {
  const why =
    error.name === "TimeoutError" || error.name === "AbortError" ? `no answer in ${timeoutMs} ms` : error.message;
  return new MigrationSecretError(`cannot reach the target's virt-handler at ${url.host}: ${why}`, {
    permanent: false,
    cause: error,
  });
}

function parseHandoff(body: string): MigrationHandoff | undefined {
  const parsed = parseJson(body); // not JSON: no secret
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const { secret, certificate } = parsed as { secret?: unknown; certificate?: unknown };
  if (typeof secret !== "string" || secret.length === 0) return undefined;
  return typeof certificate === "string" && certificate.length > 0 ? { secret, certificate } : { secret };
}

/** The source launcher's certificate must be one (readable) and valid now; throws a 400 Status otherwise. */
function checkCurrent(certificate: string, now: Date): void {
  let info: ReturnType<typeof certificateInfo>;
  try {
    info = certificateInfo(certificate);
  } catch {
    throw statusError(400, "BadRequest", "the source launcher's certificate is not an X.509 PEM certificate");
  }
  if (now < info.notBefore || now > info.notAfter) {
    throw statusError(
      400,
      "BadRequest",
      `the source launcher's certificate is valid from ${info.notBefore.toISOString()} to ${info.notAfter.toISOString()}, not now`,
    );
  }
}
