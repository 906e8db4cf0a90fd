/**
 * How the one-time migration secret travels from the target handler to the source handler: handler to handler over
 * mutual TLS, never through the API server (so no component needs to read Secrets for it). The target launcher's
 * listener refuses any peer that cannot prove knowledge of the secret (HMAC challenge); the secret never appears in
 * the VMI's status, which every VMI reader can see, and lives only in the memory of the target handler process.
 *
 *   target virt-handler                                          source virt-handler
 *   prepare-target -> launcher: { address, secret }
 *   hold(migrationUid, secret) in memory
 *   status.migrationState: targetNodeAddress + port,
 *     targetState.syncAddress = its own server's host:port  --(VMI watch)-->  plan: migrate
 *                                                            <--  GET https://{syncAddress}/v1/namespaces/{ns}/
 *                                                                 virtualmachineinstances/{name}/migrations/{uid}/secret
 *                                                                 client cert CN kubevirt.io:system:node:virt-handler,
 *                                                                 header X-KubeVirt-Source-Node: {its node}
 *   checks: peer CN is virt-handler's; VMI known here; {uid} is its open migration, this node its target, the
 *   header its sourceNode; the secret held by this process
 *                                                            -->  200 {"secret": "..."} | Status 403, 404, 409
 *                                                                 source verifies the target's certificate (KubeVirt
 *                                                                 CA, CN kubevirt.io:system:node:virt-handler), then
 *                                                                 launcher.migrate({ ..., secret })
 *
 * Every handler presents the same certificate (`kubevirt-virt-handler-server-certs`, issued for server and client
 * use), so the target cannot tell one node's handler from another's by certificate: the source node check compares
 * the caller's stated node with the VMI's migrationState.sourceNode, which stops confused callers, not a handler
 * that lies. virt-api's client certificate is refused here, and the handler's on virt-api's endpoints.
 */
import type { IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { PeerCertificate } from "node:tls";
import type { VirtualMachineInstance } from "@kvt/api";
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

/** Moves migration secrets between handlers. */
export interface MigrationSecrets {
  /** Target side: keep `secret` of `migrationUid` for the source handler (replacing one from a retried prepare). */
  publish(vmi: VirtualMachineInstance, migrationUid: string, secret: string): void;
  /** Target side: whether this process holds the secret of `migrationUid`. */
  holds(migrationUid: string): boolean;
  /** Target side: forget a migration that ended. */
  release(migrationUid: string): void;
  /** Source side: the secret from the target's handler; rejects with a {@link MigrationSecretError}. */
  read(vmi: VirtualMachineInstance, migrationUid: string): Promise<string>;
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
  readonly #held = new Map<string, { vmiUid: string; secret: string }>();

  constructor(options: HandlerMigrationSecretsOptions) {
    this.#o = options;
  }

  publish(vmi: VirtualMachineInstance, migrationUid: string, secret: string): void {
    this.#held.set(migrationUid, { vmiUid: vmi.metadata?.uid ?? "", secret });
  }

  holds(migrationUid: string): boolean {
    return this.#held.has(migrationUid);
  }

  release(migrationUid: string): void {
    this.#held.delete(migrationUid);
  }

  /**
   * Target side, for the server: the secret the handler of `callerNode` may have for `migrationUid` of `vmi` (this
   * handler's cache entry, undefined when unknown here); throws the Status to answer otherwise.
   */
  answer(vmi: VirtualMachineInstance | undefined, migrationUid: string, callerNode: string): string {
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
    return held.secret;
  }

  async read(vmi: VirtualMachineInstance, migrationUid: string): Promise<string> {
    const address = vmi.status?.migrationState?.targetState?.syncAddress;
    if (!address || !/^(\[[0-9a-fA-F:.]+\]|[^\s/:@[\]]+):\d{1,5}$/.test(address)) {
      throw new MigrationSecretError(
        `the target's virt-handler has not published its address (migrationState.targetState.syncAddress: ${JSON.stringify(address ?? null)})`,
        { permanent: false },
      );
    }
    const ns = vmi.metadata?.namespace ?? "default";
    const url = new URL(`https://${address}${migrationSecretPath(ns, vmi.metadata?.name ?? "", migrationUid)}`);
    const { status, body } = await this.#get(url);
    if (status === 200) {
      const secret = parseSecret(body);
      if (secret) return secret;
      throw new MigrationSecretError(`the target's virt-handler at ${address} sent no secret`, { permanent: true });
    }
    const message = `the target's virt-handler at ${address} answered ${status}: ${answerMessage(body, 200)}`;
    // 403: it refused this caller or this migration; 400 and 405: we do not speak its protocol. Others may pass
    // (404: its cache has not seen the migration yet; 409: it restarted and prepares the target again; 5xx).
    throw new MigrationSecretError(message, { permanent: status === 400 || status === 403 || status === 405 });
  }

  /** One GET with the handler's client certificate, the target checked by CA and CN, bounded by the timeout. */
  #get(url: URL): Promise<{ status: number; body: string }> {
    const { cert, key, ca } = this.#o.tls();
    const timeoutMs = this.#o.timeoutMs ?? SECRET_REQUEST_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const req = httpsRequest(url, {
        method: "GET",
        cert,
        key,
        ca,
        headers: { [SOURCE_NODE_HEADER]: this.#o.nodeName, accept: "application/json" },
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
      req.end();
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

function parseSecret(body: string): string | undefined {
  const parsed = parseJson(body); // not JSON: no secret
  const secret = typeof parsed === "object" && parsed !== null ? (parsed as { secret?: unknown }).secret : undefined;
  return typeof secret === "string" && secret.length > 0 ? secret : undefined;
}
