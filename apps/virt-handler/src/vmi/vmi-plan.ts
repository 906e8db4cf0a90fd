/**
 * What the handler should ask its launchers to do for one VMI (pure; table-tested). Level-based: the same inputs
 * always give the same actions, and every action is idempotent on the launcher, so re-running a plan is safe.
 *
 *   source side (status.nodeName == me, Scheduled/Running):
 *     deleting + domain Running/Paused            -> shutdown(terminationGracePeriodSeconds, default 30)
 *     domain NoDomain, no refusal yet              -> sync (boot the guest)
 *     migrationState open, abortRequested          -> cancel-migration (when the launcher is migrating it)
 *     migrationState open, target published        -> migrate (options from migrationConfiguration)
 *   target side (migrationState.targetNode == me, not yet the owner):
 *     target launcher NoDomain, migration open     -> prepare-target
 *     target launcher Ready, its secret not published
 *       by this handler process (it restarted)     -> prepare-target again (the launcher answers the same)
 *     migration failed (a cancel too, once the
 *       source reports it), launcher waiting       -> kill the target launcher (abortRequested alone: wait)
 */
import { DEFAULT_GRACE_PERIOD_SECONDS, type VirtualMachineInstance } from "@kvt/api";
import type { DomainInfo, MigrateRequestOptions } from "@kvt/launcher-rpc";
import { migrationOptionsOf } from "../migration/migration-options.ts";
import { publishedTarget } from "../migration/migration-status.ts";
import { type LauncherFacts, ownsVmi } from "./vmi-status.ts";

/** One command for a launcher. `on` says which: the VMI's own launcher here, or this node's migration target. */
export type HandlerAction =
  | { readonly kind: "sync"; readonly on: "source" }
  | { readonly kind: "shutdown"; readonly on: "source"; readonly gracePeriodSeconds: number }
  | {
      readonly kind: "migrate";
      readonly on: "source";
      readonly migrationUid: string;
      readonly target: { host: string; port: number };
      readonly options: MigrateRequestOptions;
    }
  | { readonly kind: "cancel-migration"; readonly on: "source"; readonly migrationUid: string }
  | { readonly kind: "prepare-target"; readonly on: "target"; readonly migrationUid: string }
  | { readonly kind: "kill"; readonly on: "target" };

/** What the handler process remembers that the status does not say. */
export interface PlanMemory {
  /** This process published the migration secret of the open migration (default true). */
  readonly secretPublished?: boolean;
}

/** Plans the actions for `vmi` on node `nodeName`. */
export function planVmi(
  vmi: VirtualMachineInstance,
  source: LauncherFacts,
  target: DomainInfo | undefined,
  nodeName: string,
  memory: PlanMemory = {},
): HandlerAction[] {
  if (ownsVmi(vmi, nodeName)) return planSource(vmi, source);
  return planTarget(vmi, target, nodeName, memory.secretPublished ?? true);
}

function planSource(vmi: VirtualMachineInstance, source: LauncherFacts): HandlerAction[] {
  const info = source.info;
  if (!info || source.gone) return [];
  const live = info.state === "Running" || info.state === "Paused";
  if (vmi.metadata?.deletionTimestamp) {
    if (!live && info.state !== "NoDomain") return [];
    const grace = vmi.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_PERIOD_SECONDS;
    return [{ kind: "shutdown", on: "source", gracePeriodSeconds: grace }];
  }
  if (info.state === "NoDomain") return source.syncFailure ? [] : [{ kind: "sync", on: "source" }];
  const ms = vmi.status?.migrationState;
  if (info.state !== "Running" || !ms?.migrationUid || ms.completed || ms.failed) return [];
  const uid = ms.migrationUid;
  const underway = info.migration?.migrationUid === uid && info.migration.role === "source";
  if (ms.abortRequested) {
    return underway && info.migration?.phase === "Running"
      ? [{ kind: "cancel-migration", on: "source", migrationUid: uid }]
      : [];
  }
  const to = publishedTarget(vmi);
  if (!to || underway) return [];
  return [
    {
      kind: "migrate",
      on: "source",
      migrationUid: uid,
      target: to,
      options: migrationOptionsOf(ms.migrationConfiguration),
    },
  ];
}

function planTarget(
  vmi: VirtualMachineInstance,
  target: DomainInfo | undefined,
  nodeName: string,
  secretPublished: boolean,
): HandlerAction[] {
  const ms = vmi.status?.migrationState;
  if (!ms?.migrationUid || ms.targetNode !== nodeName || !target) return [];
  // Over once the source reports it failed (a cancel ends so too: sourceMigrationStatus). Not on abortRequested
  // alone: killing the target then races the source's cancel, and a stream cut first fails the abort (abortStatus
  // Failed; seen on real nodes, where both handlers see the request at the same moment).
  if (ms.failed === true)
    return target.state === "IncomingMigration" || target.state === "NoDomain" ? [{ kind: "kill", on: "target" }] : [];
  if (ms.completed || ms.abortRequested) return [];
  const prepare: HandlerAction = { kind: "prepare-target", on: "target", migrationUid: ms.migrationUid };
  if (target.state === "NoDomain") return [prepare];
  // Prepared before this handler (re)started: it may have died between the launcher's answer and publishing the
  // secret, and the source cannot connect without it. A repeated prepare gets the same listener and secret.
  const m = target.migration;
  const waiting = target.state === "IncomingMigration" && m?.migrationUid === ms.migrationUid && m.phase === "Ready";
  return waiting && !secretPublished ? [prepare] : [];
}
