/**
 * virt-handler's VMI controller: for each VMI this node owns (status.nodeName) or receives (migrationState.
 * targetNode), reads its launcher from the registry, plans (vmi-plan.ts), acts through launcher-rpc, then writes
 * the status (vmi-status.ts, migration-status.ts) as a JSON patch with `test` ops, so concurrent writers
 * (virt-controller) never lose each other's updates. The retry policy belongs to the runner.
 */
import { LABEL, type ObjectKey, type VirtualMachineInstance } from "@kvt/api";
import { mintMigrationCertificate } from "@kvt/certs";
import {
  done,
  type JsonPatchOp,
  patchField,
  pointer,
  type ReconcileContext,
  type Result,
  requeueAfter,
} from "@kvt/kube";
import { type JsonObject, LauncherRpcError, type MigrationTlsIdentity } from "@kvt/launcher-rpc";
import { CriticalNetworkError } from "@kvt/pod-network";
import { chooseLauncher } from "../launchers/domain-choice.ts";
import type { LauncherView } from "../launchers/launcher-registry.ts";
import { type MigrationHandoff, MigrationSecretError, type MigrationSecrets } from "../migration/migration-secrets.ts";
import { sourceMigrationStatus, targetMigrationStatus } from "../migration/migration-status.ts";
import { failLostMigration, type SourceLauncherLoss, sourceLauncherLoss } from "../migration/source-recovery.ts";
import { commandSpan, tagReconcile } from "../tracing/handler-spans.ts";
import { type HandlerAction, planVmi } from "./vmi-plan.ts";
import { computeVmiStatus, type LauncherFacts, ownsVmi } from "./vmi-status.ts";

/** How often a source waiting for the target's migration secret looks again (KubeVirt: 1 s for the target's ports). */
const SECRET_POLL_MS = 1000;
/**
 * How long a source keeps asking an unreachable or not-yet-ready target handler for the migration secret before the
 * migration fails (a restarting target handler is back well within it).
 */
export const SECRET_DEADLINE_MS = 60_000;

/** Reads VMIs from the informer cache. */
export interface VmiCache {
  get(key: ObjectKey): VirtualMachineInstance | undefined;
}

/** Writes VMI status. */
export interface VmiStatusWriter {
  patchStatus(namespace: string, name: string, ops: readonly JsonPatchOp[]): Promise<unknown>;
  /** Merges `labels` into the VMI's labels (a merge patch: other labels stay). */
  patchLabels?(namespace: string, name: string, labels: Record<string, string>): Promise<unknown>;
}

/** The launchers on this node. */
export interface Launchers {
  readonly synced: boolean;
  forVmi(uid: string): LauncherView[];
}

/** What the controller is built from. */
export interface VmiControllerDeps {
  readonly nodeName: string;
  readonly vmis: VmiCache;
  readonly writer: VmiStatusWriter;
  readonly launchers: Launchers;
  readonly secrets: MigrationSecrets;
  /**
   * Where the source handler reaches this handler's server for a migration secret (`host:port`), published as the
   * target's migrationState.targetState.syncAddress; undefined while it does not serve.
   */
  readonly syncAddress?: () => string | undefined;
  /** RFC 3339 now, second resolution; injectable for tests. */
  readonly now?: () => string;
  /** Milliseconds clock for how long a launcher has been missing; injectable for tests. */
  readonly clockMs?: () => number;
  /** Mints a launcher's per-migration TLS identity; default @kvt/certs mintMigrationCertificate. */
  readonly mintTls?: (commonName: string) => Promise<MigrationTlsIdentity>;
  /**
   * Plumbs the launcher pod's network before the launcher builds the guest (network/pod-network-wiring.ts); unset:
   * launchers plumb their own (the local cluster's root launchers).
   */
  readonly podNetwork?: PodNetworkSetup;
}

/** The handler's half of the pod network (network/pod-network-wiring.ts PodNetworkWiring). */
export interface PodNetworkSetup {
  ensure(
    vmi: VirtualMachineInstance,
    launcher: { readonly socketPath: string; readonly podUid?: string },
    log: ReconcileContext["logger"],
  ): Promise<void>;
}

/** A fresh key pair and short-lived self-signed certificate for one launcher of one migration (ADR 0013). */
export async function mintLauncherTls(commonName: string): Promise<MigrationTlsIdentity> {
  const { certPem, keyPem } = await mintMigrationCertificate(commonName);
  return { certificate: certPem, key: keyPem };
}

/** The common name of a launcher's certificate for a migration: which migration, which side (64 chars at most). */
function migrationCommonName(migrationUid: string, side: "source" | "target"): string {
  return `kubevirt-migration-${migrationUid.slice(0, 36)}-${side}`;
}

/** KubeVirt's migrations.disableTLS as the VMI's migrationState carries it. */
function tlsDisabled(vmi: VirtualMachineInstance): boolean {
  return vmi.status?.migrationState?.migrationConfiguration?.disableTLS === true;
}

/** Reconciles one VMI key. */
export class VmiController {
  readonly #d: VmiControllerDeps;
  /** VMI uid -> why its launcher refused the spec (terminal for that VMI). */
  readonly #syncFailures = new Map<string, string>();
  /** Target side: migrations whose prepared launcher would not repeat its answer (not asked again). */
  readonly #prepareRefused = new Set<string>();
  /** Source side: migration uid -> when this handler first failed to get its secret (ms clock). */
  readonly #secretWaitSince = new Map<string, number>();
  /** Source side: migration uid -> why it failed for want of its secret (written into migrationState). */
  readonly #secretFailures = new Map<string, string>();
  /** VMI uid -> when this handler first saw its launcher missing during a migration (ms clock). */
  readonly #missingSince = new Map<string, number>();
  /** Source side: migration uid -> its launcher's TLS identity, minted once and sent with every exchange. */
  readonly #sourceTls = new Map<string, Promise<MigrationTlsIdentity>>();

  constructor(deps: VmiControllerDeps) {
    this.#d = deps;
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const vmi = this.#d.vmis.get(key);
    if (!vmi?.metadata?.uid) return done();
    const uid = vmi.metadata.uid;
    const node = this.#d.nodeName;
    const owner = ownsVmi(vmi, node);
    const isTarget = vmi.status?.migrationState?.targetNode === node && !owner;
    if (!owner && !isTarget) return done();
    // At most one domain per VMI: the launcher holding the guest is the one; no other is ever synced.
    const { view, duplicates } = chooseLauncher(this.#d.launchers.forVmi(uid), vmi);
    const live = view && !view.gone ? view : undefined;
    for (const d of duplicates) await this.#killDuplicate(d, ctx);
    tagReconcile(ctx.span, vmi, live?.info, node);
    const ms = vmi.status?.migrationState;
    if (ms?.migrationUid && (ms.completed || ms.failed)) this.#forgetMigration(ms.migrationUid);
    const secretPublished = this.#preparedHere(ms?.migrationUid);
    let waitMs: number | undefined;
    for (const action of planVmi(vmi, this.#facts(uid, view), live?.info, node, { secretPublished })) {
      const wait = await commandSpan(action.kind, vmi, () => this.#apply(action, vmi, view, ctx));
      if (wait !== undefined) waitMs = Math.min(waitMs ?? wait, wait);
    }
    const facts = this.#facts(uid, view);
    const loss = owner ? this.#sourceLoss(vmi, facts) : ({ kind: "none" } as const);
    if (loss.kind === "await-target")
      ctx.logger.info(
        { targetNode: vmi.status?.migrationState?.targetNode },
        "source launcher gone mid-migration; waiting for the target to report",
      );
    await this.#writeStatus(vmi, loss.kind === "await-target" ? { ...facts, awaitingTarget: true } : facts, ctx, loss);
    if (loss.kind === "await-target") return requeueAfter(loss.retryAfterMs);
    if (waitMs !== undefined) return requeueAfter(waitMs);
    // No launcher yet for a VMI we own: the registry will tell us when one appears; poll as a safety net.
    return owner && !view ? requeueAfter(2000) : done();
  }

  /** Target side: this process holds the migration's secret, or its launcher would not repeat it. */
  #preparedHere(migrationUid: string | undefined): boolean {
    if (!migrationUid) return false;
    return this.#d.secrets.holds(migrationUid) || this.#prepareRefused.has(migrationUid);
  }

  #forgetMigration(migrationUid: string): void {
    this.#d.secrets.release(migrationUid);
    this.#prepareRefused.delete(migrationUid);
    this.#secretWaitSince.delete(migrationUid);
    this.#secretFailures.delete(migrationUid);
    this.#sourceTls.delete(migrationUid);
  }

  #mint(migrationUid: string, side: "source" | "target"): Promise<MigrationTlsIdentity> {
    return (this.#d.mintTls ?? mintLauncherTls)(migrationCommonName(migrationUid, side));
  }

  /** Source side: the launcher's identity of this migration, the same on every retry of the exchange. */
  #sourceIdentity(migrationUid: string): Promise<MigrationTlsIdentity> {
    let tls = this.#sourceTls.get(migrationUid);
    if (!tls) {
      tls = this.#mint(migrationUid, "source");
      tls.catch(() => this.#sourceTls.delete(migrationUid)); // a later reconcile mints again
      this.#sourceTls.set(migrationUid, tls);
    }
    return tls;
  }

  /** The source's verdict when its launcher is missing mid-migration (it remembers since when it is missing). */
  #sourceLoss(vmi: VirtualMachineInstance, facts: LauncherFacts): SourceLauncherLoss {
    const uid = vmi.metadata!.uid!;
    const nowMs = (this.#d.clockMs ?? Date.now)();
    const since = this.#missingSince.get(uid) ?? nowMs;
    const loss = sourceLauncherLoss(vmi, facts, this.#d.nodeName, nowMs - since);
    if (loss.kind === "await-target") this.#missingSince.set(uid, since);
    else this.#missingSince.delete(uid);
    return loss;
  }

  /** Kills a launcher holding a second guest of a VMI (it should not exist: see domain-choice.ts). */
  async #killDuplicate(view: LauncherView, ctx: ReconcileContext): Promise<void> {
    ctx.logger.error(
      { socket: view.socketPath, pod: view.info.pod, state: view.info.state, reason: "DuplicateDomain" },
      "a second guest of this VMI runs on this node: killing it",
    );
    await view.client.kill();
  }

  /** The launcher pod's network, plumbed by this handler when it is configured to (before the guest is built). */
  async #plumbPodNetwork(vmi: VirtualMachineInstance, view: LauncherView, ctx: ReconcileContext): Promise<void> {
    const podUid = view.info.pod?.uid;
    await this.#d.podNetwork?.ensure(vmi, { socketPath: view.socketPath, ...(podUid ? { podUid } : {}) }, ctx.logger);
  }

  #facts(uid: string, view: LauncherView | undefined): LauncherFacts {
    const failure = this.#syncFailures.get(uid);
    return {
      registrySynced: this.#d.launchers.synced,
      ...(view ? { info: view.info, gone: view.gone } : {}),
      ...(failure ? { syncFailure: failure } : {}),
    };
  }

  async #apply(
    action: HandlerAction,
    vmi: VirtualMachineInstance,
    view: LauncherView | undefined,
    ctx: ReconcileContext,
  ): Promise<number | undefined> {
    if (!view) return undefined;
    const client = view.client;
    const uid = vmi.metadata!.uid!;
    ctx.logger.info({ action: action.kind }, "launcher command");
    switch (action.kind) {
      case "sync":
        try {
          await this.#plumbPodNetwork(vmi, view, ctx);
        } catch (error) {
          if (!(error instanceof CriticalNetworkError)) throw error; // the runner retries the VMI
          // The pod's network is past rebuilding: the VMI fails (KubeVirt: "failed to configure vmi network").
          const reason = `failed to configure vmi network: ${error.message}`;
          this.#syncFailures.set(uid, reason);
          ctx.logger.error({ reason }, "the launcher pod's network cannot be set up");
          return;
        }
        try {
          view.info = await client.sync({ vmi: vmi as unknown as JsonObject }, { timeoutMs: 60_000 });
        } catch (error) {
          if (error instanceof LauncherRpcError && error.code === "BadRequest") {
            this.#syncFailures.set(uid, error.message); // a spec the launcher refuses will not get better
            ctx.logger.warn({ reason: error.message }, "launcher refused the VMI");
            return;
          }
          throw error;
        }
        return;
      case "shutdown":
        await client.shutdown(
          { gracePeriodSeconds: action.gracePeriodSeconds },
          { timeoutMs: action.gracePeriodSeconds * 1000 + 15_000 },
        );
        return;
      case "kill":
        await client.kill();
        return;
      case "cancel-migration":
        await client.cancelMigration({ migrationUid: action.migrationUid });
        return;
      case "prepare-target": {
        await this.#plumbPodNetwork(vmi, view, ctx);
        const again = view.info.state !== "NoDomain";
        // A fresh identity for the target launcher (a repeated prepare keeps, and answers, its first one).
        const tls = tlsDisabled(vmi) ? {} : { tls: await this.#mint(action.migrationUid, "target") };
        const target = await client
          .prepareTarget({ migrationUid: action.migrationUid, vmi: vmi, ...tls }, { timeoutMs: 30_000 })
          .catch((error: unknown) => {
            // Asking a prepared target again is a recovery step: a launcher that will not answer it twice must not
            // stop the rest of this reconcile (the status of the migration) forever.
            if (!again || !(error instanceof LauncherRpcError) || error.code !== "Conflict") throw error;
            ctx.logger.warn({ reason: error.message }, "the prepared target did not repeat its answer");
            // Without its answer this process holds no secret: the source's request is refused (409) and the
            // migration fails after SECRET_DEADLINE_MS, rather than the plan asking the launcher in a loop.
            this.#prepareRefused.add(action.migrationUid);
            return undefined;
          });
        if (!target) return;
        const certificate = target.certificate === undefined ? {} : { certificate: target.certificate };
        this.#d.secrets.publish(vmi, action.migrationUid, { secret: target.secret, ...certificate });
        view.info = await client.info();
        return;
      }
      case "migrate": {
        const tls = action.options.disableTLS === true ? undefined : await this.#sourceIdentity(action.migrationUid);
        const handoff = await this.#migrationSecret(vmi, action.migrationUid, tls?.certificate, ctx);
        if (typeof handoff === "number" || handoff === undefined) return handoff;
        const certificate = handoff.certificate === undefined ? {} : { certificate: handoff.certificate };
        await client.migrate({
          migrationUid: action.migrationUid,
          target: { ...action.target, secret: handoff.secret, ...certificate },
          options: action.options,
          ...(tls ? { tls } : {}),
        });
        view.info = await client.info();
        return;
      }
    }
  }

  /**
   * Source side: the secret and the target launcher's certificate from the target's handler, for this launcher's
   * `certificate`; a delay (ms) to look again when it is not there yet (the target's handler answers without a VMI
   * event, so a short poll rather than a failure backoff that grows to minutes); undefined once the migration failed
   * for want of it (refused, or not given within SECRET_DEADLINE_MS).
   */
  async #migrationSecret(
    vmi: VirtualMachineInstance,
    migrationUid: string,
    certificate: string | undefined,
    ctx: ReconcileContext,
  ): Promise<MigrationHandoff | number | undefined> {
    if (this.#secretFailures.has(migrationUid)) return undefined; // its failure is still being written
    try {
      const handoff = await this.#d.secrets.exchange(vmi, migrationUid, certificate);
      this.#secretWaitSince.delete(migrationUid);
      return handoff;
    } catch (error) {
      if (!(error instanceof MigrationSecretError)) throw error;
      const nowMs = (this.#d.clockMs ?? Date.now)();
      const since = this.#secretWaitSince.get(migrationUid) ?? nowMs;
      this.#secretWaitSince.set(migrationUid, since);
      if (error.permanent || nowMs - since >= SECRET_DEADLINE_MS) {
        const why = error.permanent ? "" : ` (for ${Math.round((nowMs - since) / 1000)} s)`;
        const reason = `Failed to get the migration secret from the target: ${error.message}${why}`;
        ctx.logger.warn({ migrationUid, reason }, "the migration failed");
        this.#secretFailures.set(migrationUid, reason);
        return undefined;
      }
      ctx.logger.info({ migrationUid, reason: error.message }, "waiting for the target's migration secret");
      return SECRET_POLL_MS;
    }
  }

  async #writeStatus(
    vmi: VirtualMachineInstance,
    facts: LauncherFacts,
    ctx: ReconcileContext,
    loss: SourceLauncherLoss,
  ): Promise<void> {
    const now = (this.#d.now ?? nowSeconds)();
    const node = this.#d.nodeName;
    let status = computeVmiStatus(vmi, facts, { nodeName: node, now });
    if (loss.kind === "lost") {
      ctx.logger.warn({ reason: loss.failureReason }, "source launcher lost mid-migration; the migration failed");
      status = failLostMigration(status, loss.failureReason, now);
    }
    const secretFailure = this.#secretFailures.get(vmi.status?.migrationState?.migrationUid ?? "");
    if (secretFailure && ownsVmi(vmi, node)) status = failLostMigration(status, secretFailure, now);
    // The source half comes from a source launcher on the owning node; the target half from a target launcher
    // here (also after nodeName moved to this node, so targetNodeDomainDetected is never skipped).
    if (ownsVmi(vmi, node) && facts.info?.migration?.role !== "target")
      status = sourceMigrationStatus(status, facts.info, now);
    const syncAddress = this.#d.syncAddress?.();
    status = targetMigrationStatus(status, facts.info, {
      nodeName: node,
      now,
      ...(syncAddress ? { syncAddress } : {}),
    });
    const ops = statusPatch(vmi.status, status);
    const [ns, name] = [vmi.metadata!.namespace ?? "default", vmi.metadata!.name!];
    if (ops.length > 0) {
      ctx.logger.debug({ ops: ops.length, phase: status.phase }, "writing VMI status");
      await this.#d.writer.patchStatus(ns, name, ops);
    }
    // KubeVirt's kubevirt.io/nodeName label follows the node that runs the guest (also after a migration's handoff,
    // which this handler may have made as the target): `kubectl get vmi -l kubevirt.io/nodeName=N` finds it.
    if (ownsVmi({ ...vmi, status }, node) && vmi.metadata?.labels?.[LABEL.nodeName] !== node)
      await this.#d.writer.patchLabels?.(ns, name, { [LABEL.nodeName]: node });
  }
}

/** The JSON patch from `old` to `next` status, field by field, each guarded by a `test` of the old value. */
export function statusPatch(old: Record<string, unknown> | undefined, next: Record<string, unknown>): JsonPatchOp[] {
  if (!old) return Object.keys(next).length > 0 ? [{ op: "add", path: "/status", value: next }] : [];
  const keys = new Set([...Object.keys(old), ...Object.keys(next)]);
  return [...keys].flatMap((k) => patchField(pointer("status", k), old[k], next[k]));
}

function nowSeconds(): string {
  return `${new Date().toISOString().slice(0, 19)}Z`;
}
