/**
 * Flows that a live migration left pinned to the old pod address (beyond KubeVirt, which leaves them). A client's
 * connection to a VMI's Service is DNATed by kube-proxy in the client's node's network namespace, and the conntrack
 * entry keeps it on the source launcher pod's address after the guest moved to the target pod: kube-proxy deletes
 * such entries for UDP only. Every handler watches every VMI, so each one, in its own node's namespace, deletes the
 * entries whose replies come from the address the VMI left; the flow's next segment then meets the Service's rules
 * again and is DNATed to the target pod, whose masquerade hands it to the guest (its TCP state moved with it):
 *
 *   VMI update: migrationState M (not completed), pod address A     -> remember A as M's source address
 *   VMI update: M completed, not failed, pod address B (the target's report) -> A moved: forget A's flows
 *     conntrack -D --reply-src A   at 0, 1, 2, 4, 8, 16 s after the move (@kvt/pod-network's deleter)
 *
 * The passes repeat because kube-proxy applies the EndpointSlice change (A not ready) on its own schedule: until it
 * has, the flow's next segment may be DNATed to A again, and the next pass deletes that entry too. A pass that finds
 * nothing costs one `conntrack` run. A handler that starts after a migration completed did not see the source's
 * address and leaves that migration's flows alone (they time out as before).
 */
import { readlinkSync } from "node:fs";
import type { VirtualMachineInstance } from "@kvt/api";
import type { Logger } from "@kvt/observability";
import { type ConntrackDeleter, conntrackDeleter } from "@kvt/pod-network";

/**
 * The deleter for the node's network namespace `nsPath` (main.ts --node-netns): this process's own when it is there
 * already (a handler on the host network, or the local cluster's), else entered with nsenter for each call. Throws
 * when the namespace cannot be read (a handler without hostPID).
 */
export function nodeConntrackDeleter(nsPath: string, self = "/proc/self/ns/net"): ConntrackDeleter {
  let node: string;
  try {
    node = readlinkSync(nsPath);
  } catch (err) {
    throw new Error(`cannot read the node's network namespace ${nsPath}: ${(err as Error).message}`, { cause: err });
  }
  return readlinkSync(self) === node ? conntrackDeleter() : conntrackDeleter(nsPath);
}

/** One migration's address move. */
export interface AddressMove {
  readonly vmiUid: string;
  readonly migrationUid: string;
  /** The pod addresses the VMI left (replies of the flows to forget come from these). */
  readonly from: readonly string[];
  /** The addresses it has now, for logs. */
  readonly to: readonly string[];
}

/** The pod addresses of a VMI's interfaces, as its handler reports them (IPv4, sorted, unique). */
export function podAddresses(vmi: VirtualMachineInstance): string[] {
  const all = (vmi.status?.interfaces ?? []).flatMap((i) => [
    ...(i.ipAddress ? [i.ipAddress] : []),
    ...(i.ipAddresses ?? []),
  ]);
  return [...new Set(all.filter((a) => /^\d{1,3}(\.\d{1,3}){3}$/.test(a)))].sort();
}

interface Seen {
  /** The addresses of the last observation. */
  readonly last: readonly string[];
  /** The migration being followed, its source addresses, and whether its move was reported. */
  readonly migrationUid?: string;
  readonly source?: readonly string[];
  readonly done?: boolean;
}

/**
 * The migration `migrationUid` as followed so far: a migration seen for the first time takes the addresses seen
 * before it (or now, if none) as its source's. A handler that starts after the target reported has only the
 * target's, which moves nothing.
 */
function followed(before: Seen | undefined, migrationUid: string, now: readonly string[]): Seen {
  if (before?.migrationUid === migrationUid) return before;
  return { last: before?.last ?? now, migrationUid, source: before?.last.length ? before.last : now };
}

/**
 * Follows VMIs through their updates and tells when a completed migration moved a VMI's pod addresses (pure state,
 * no I/O). Each move is told once.
 */
export class AddressMoves {
  readonly #seen = new Map<string, Seen>();

  /** Takes one observed VMI; returns the move it completes, if any. */
  observe(vmi: VirtualMachineInstance): AddressMove | undefined {
    const uid = vmi.metadata?.uid;
    if (!uid) return undefined;
    const now = podAddresses(vmi);
    const before = this.#seen.get(uid);
    const ms = vmi.status?.migrationState;
    const migrationUid = ms?.migrationUid;
    if (!ms || !migrationUid) {
      this.#seen.set(uid, { last: now.length ? now : (before?.last ?? []) });
      return undefined;
    }
    const following = followed(before, migrationUid, now);
    const last = now.length ? now : following.last;
    const from = (following.source ?? []).filter((a) => !now.includes(a));
    // Not (yet) a move: still migrating, failed, told already, or completed before the target reported its
    // addresses (the update that does comes later).
    const moved = ms.completed === true && !ms.failed && !following.done && now.length > 0 && from.length > 0;
    this.#seen.set(uid, { ...following, last, done: following.done || ms.failed === true || moved });
    return moved ? { vmiUid: uid, migrationUid, from, to: now } : undefined;
  }

  /** The VMI is gone. */
  forget(uid: string): void {
    this.#seen.delete(uid);
  }
}

/** Delays (ms after the move was seen) of the deletion passes. */
export const PASS_DELAYS_MS: readonly number[] = [0, 1000, 2000, 4000, 8000, 16_000];

/** What {@link MigratedFlows} uses; tests pass a recording deleter and their own timer. */
export interface MigratedFlowsDeps {
  /** Deletes the entries in the node's network namespace (@kvt/pod-network's conntrackDeleter). */
  readonly deleter: ConntrackDeleter;
  readonly logger: Logger;
  readonly delaysMs?: readonly number[];
  readonly setTimer?: (fn: () => void, ms: number) => ReturnType<typeof setTimeout>;
}

/** Deletes the node's conntrack entries of flows to addresses VMIs left in live migrations. */
export class MigratedFlows {
  readonly #moves = new AddressMoves();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  readonly #d: MigratedFlowsDeps;
  constructor(deps: MigratedFlowsDeps) {
    this.#d = deps;
  }

  /** Takes one observed VMI (the informer's add and update); schedules the passes of a move it completes. */
  observe(vmi: VirtualMachineInstance): void {
    const move = this.#moves.observe(vmi);
    if (!move) return;
    const log = this.#d.logger.child({ vmi: `${vmi.metadata?.namespace}/${vmi.metadata?.name}`, vmiUid: move.vmiUid });
    log.info(
      { migrationUid: move.migrationUid, from: move.from, to: move.to },
      "pod address moved; clearing its flows",
    );
    const setTimer = this.#d.setTimer ?? setTimeout;
    let warned = false;
    for (const delay of this.#d.delaysMs ?? PASS_DELAYS_MS) {
      const timer = setTimer(() => {
        this.#timers.delete(timer);
        void Promise.all(
          move.from.map(async (replySource) => {
            try {
              const deleted = await this.#d.deleter({ replySource });
              if (deleted > 0)
                log.info({ replySource, deleted, afterMs: delay }, "flows to a moved pod address cleared");
            } catch (err) {
              // The flows stay pinned to the old address until they time out, as without this step.
              if (!warned) log.warn({ err, replySource }, "cannot clear the flows to a moved pod address");
              warned = true;
            }
          }),
        );
      }, delay);
      this.#timers.add(timer);
    }
  }

  /** The VMI is gone. */
  forget(uid: string): void {
    this.#moves.forget(uid);
  }

  /** Cancels the passes not yet run. */
  stop(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}
