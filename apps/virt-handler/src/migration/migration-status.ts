/**
 * Both halves of `status.migrationState` as the handlers write them (pure; table-tested). virt-controller fills in
 * migrationUid, sourceNode/sourcePod, targetNode/targetPod and migrationConfiguration, and sets abortRequested;
 * the handlers report what their launchers did:
 *
 * ```
 *  target handler (targetNode == me)           source handler (nodeName == me)
 *  launcher prepared ----> targetNodeAddress,
 *                          targetDirectMigrationNodePorts,
 *                          targetState.syncAddress (this handler's server: the source fetches the secret there)
 *                                               migrate called ---> startTimestamp, mode PreCopy
 *                                               abortRequested ---> abortStatus Aborting (cancel sent)
 *                                               result ok -------> completed, endTimestamp, nodeName := targetNode,
 *                                                                  evacuationNodeName cleared
 *                                               result failed ---> failed, failureReason, endTimestamp
 *                                                                  (abortStatus Succeeded when it was a cancel)
 *  domain running here --> targetNodeDomainDetected, targetNodeDomainReadyTimestamp, activePods[target pod]
 *  incoming migration
 *  completed here -------> completed, endTimestamp, nodeName := me   (the handoff, as KubeVirt's target
 *                          handler's ackMigrationCompletion: it needs no word from the source side, so a
 *                          source handler that is down, or restarted and finds no launcher, loses nothing)
 * ```
 * Both handlers may write the handoff; they agree on it, and the `test` ops of the status patch make the second
 * writer recompute from the first one's result.
 */
import type { MigrationState, VirtualMachineInstance, VirtualMachineInstanceStatus } from "@kvt/api";
import type { DomainInfo } from "@kvt/launcher-rpc";

/**
 * Sets `targetState.syncAddress` of an open migration whose target launcher listens (`listener`) to `syncAddress`: it
 * follows this handler, so one restarted on another pod IP publishes its new address.
 */
function withSyncAddress(next: MigrationState, listener: unknown, syncAddress: string | undefined): void {
  if (!listener || !syncAddress || next.completed || next.failed) return;
  if (next.targetState?.syncAddress === syncAddress) return;
  next.targetState = { ...next.targetState, syncAddress };
}

/** True when `info` is this migration's launcher in `role`. */
export function isMigrationLauncher(
  info: DomainInfo | undefined,
  migration: MigrationState | undefined,
  role: "source" | "target",
): boolean {
  return (
    !!info?.migration &&
    !!migration?.migrationUid &&
    info.migration.migrationUid === migration.migrationUid &&
    info.migration.role === role
  );
}

/** Source half: what the source launcher's migration report means for the status. */
export function sourceMigrationStatus(
  status: VirtualMachineInstanceStatus,
  info: DomainInfo | undefined,
  now: string,
): VirtualMachineInstanceStatus {
  const ms = status.migrationState;
  if (!ms?.migrationUid || ms.completed || ms.failed || !info) return status;
  if (!isMigrationLauncher(info, ms, "source")) {
    // Cancelled before the source ever started sending: nothing to abort, the migration simply failed.
    if (!ms.abortRequested) return status;
    const failed: MigrationState = {
      ...ms,
      failed: true,
      abortStatus: "Succeeded",
      failureReason: "canceled",
      endTimestamp: now,
    };
    return { ...status, migrationState: failed };
  }
  const m = info.migration!;
  const next: MigrationState = {
    ...ms,
    mode: ms.mode ?? "PreCopy",
    startTimestamp: ms.startTimestamp ?? m.startTime ?? now,
  };
  if (m.phase === "Succeeded") {
    next.completed = true;
    next.endTimestamp = m.endTime ?? now;
    if (ms.abortRequested) next.abortStatus = "Failed"; // too late to cancel: it finished first
    const activePods = { ...status.activePods };
    if (info.pod.uid) delete activePods[info.pod.uid];
    // The VMI has left the node it was evacuated from: the mark goes (KubeVirt ackMigrationCompletion), so a later
    // drain of its new node can mark it again.
    const { evacuationNodeName: _left, ...rest } = status;
    return { ...rest, migrationState: next, nodeName: ms.targetNode ?? status.nodeName, activePods };
  }
  if (m.phase === "Failed") {
    next.failed = true;
    next.endTimestamp = m.endTime ?? now;
    next.failureReason = m.result?.failureReason ?? "migration failed";
    if (ms.abortRequested) next.abortStatus = m.result?.failureReason === "canceled" ? "Succeeded" : "Failed";
    return { ...status, migrationState: next };
  }
  if (ms.abortRequested) next.abortStatus = "Aborting";
  return { ...status, migrationState: next };
}

/**
 * Target half: publish where the source connects (the launcher's listener, and `targetState.syncAddress`, where the
 * source's handler fetches the migration secret from this handler: `ctx.syncAddress`), then that the domain runs here.
 */
export function targetMigrationStatus(
  status: VirtualMachineInstanceStatus,
  info: DomainInfo | undefined,
  ctx: { nodeName: string; now: string; syncAddress?: string },
): VirtualMachineInstanceStatus {
  const ms = status.migrationState;
  if (!ms || ms.targetNode !== ctx.nodeName || !info?.migration || !isMigrationLauncher(info, ms, "target")) {
    return status;
  }
  const next: MigrationState = { ...ms };
  const address = info.migration.targetAddress;
  if (address && !ms.targetNodeAddress) {
    next.targetNodeAddress = address.host;
    next.targetDirectMigrationNodePorts = { [String(address.port)]: 0 };
  }
  withSyncAddress(next, address, ctx.syncAddress);
  let activePods = status.activePods;
  const arrived = (info.state === "Running" || info.state === "Paused") && info.migration.phase === "Succeeded";
  if (arrived && !ms.targetNodeDomainDetected) {
    next.targetNodeDomainDetected = true;
    next.targetNodeDomainReadyTimestamp = ctx.now;
    if (info.pod.uid) activePods = { ...activePods, [info.pod.uid]: ctx.nodeName };
  }
  let nodeName = status.nodeName;
  if (arrived && !ms.completed && !ms.failed) {
    // The guest runs here: the migration completed, whatever the source side knows or says.
    next.completed = true;
    next.endTimestamp = info.migration.endTime ?? ctx.now;
    // Unset when the source handler went down right after starting the move: the target's ready time bounds it.
    next.startTimestamp = ms.startTimestamp ?? info.migration.startTime ?? next.endTimestamp;
    next.mode = ms.mode ?? "PreCopy";
    if (ms.abortRequested) next.abortStatus = "Failed"; // too late to cancel: it finished first
    nodeName = ctx.nodeName;
    // Only the pod that runs the guest stays active: the source pod's entry goes with the handoff.
    activePods = Object.fromEntries(Object.entries(activePods ?? {}).filter(([, node]) => node === ctx.nodeName));
  }
  // The VMI left the node it may have been evacuated from: the mark goes with the handoff, as on the source side.
  const { evacuationNodeName: _left, ...rest } = status;
  return {
    ...(nodeName === status.nodeName ? status : rest),
    ...(nodeName ? { nodeName } : {}),
    migrationState: next,
    ...(activePods ? { activePods } : {}),
  };
}

/** The target the source should send to, once the target half published it; undefined until then. */
export function publishedTarget(vmi: VirtualMachineInstance): { host: string; port: number } | undefined {
  const ms = vmi.status?.migrationState;
  const port = Number(Object.keys(ms?.targetDirectMigrationNodePorts ?? {})[0]);
  if (!ms?.targetNodeAddress || !Number.isInteger(port) || port <= 0 || port > 65_535) return undefined;
  return { host: ms.targetNodeAddress, port };
}
