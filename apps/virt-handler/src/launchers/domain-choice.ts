/**
 * Which of a VMI's launchers on this node the handler talks to: at most one domain per VMI, always (pure).
 *
 *   launchers of the VMI here            chosen                                 duplicates (killed)
 *   -----------------------------------  -------------------------------------  ---------------------------------
 *   none live                            the latest gone one (its final state)  none
 *   live, none holding a guest           the one of the VMI's active pod, else  none: the others are never synced
 *                                        the first                              (no second domain is ever started)
 *   one or more holding a guest          the one of the VMI's active pod, else  every other one holding a guest
 *   (Running, Paused, IncomingMigration) the one running longest
 *
 * A launcher that holds no guest is never given a domain while another launcher of the same VMI holds one: the
 * chosen one has the guest. KubeVirt's handler keeps one domain per VMI uid in its cache and starts a domain only
 * when the cache has none; with the launchers' fencing lock (virt-launcher's fencing/vmi-lock.ts) two live
 * launchers of one VMI on one node should never exist, so duplicates only come from launchers older than the lock.
 */
import type { VirtualMachineInstance } from "@kvt/api";
import type { LauncherView } from "./launcher-registry.ts";

/** The handler's choice among a VMI's launchers. */
export interface LauncherChoice {
  /** The launcher to reconcile (live when any is), or undefined when the VMI has none here. */
  readonly view: LauncherView | undefined;
  /** Live launchers holding a second guest for the VMI: to be killed. */
  readonly duplicates: LauncherView[];
}

const GUEST_STATES = new Set(["Running", "Paused", "IncomingMigration"]);

/** True when the launcher's report says it holds a guest. */
export function holdsGuest(view: LauncherView): boolean {
  return !view.gone && GUEST_STATES.has(view.info.state);
}

/** Chooses among the launchers `views` of `vmi` on this node (see the table above). */
export function chooseLauncher(views: readonly LauncherView[], vmi: VirtualMachineInstance): LauncherChoice {
  const live = views.filter((v) => !v.gone);
  if (live.length === 0) return { view: views[0], duplicates: [] };
  const activePods = new Set(Object.keys(vmi.status?.activePods ?? {}));
  const ofActivePod = (v: LauncherView): boolean => v.info.pod.uid !== undefined && activePods.has(v.info.pod.uid);
  const guests = live.filter(holdsGuest);
  if (guests.length === 0) return { view: live.find(ofActivePod) ?? live[0], duplicates: [] };
  const byAge = [...guests].sort((a, b) => startedMs(a) - startedMs(b));
  const view = guests.find(ofActivePod) ?? byAge[0];
  return { view, duplicates: guests.filter((g) => g !== view) };
}

function startedMs(view: LauncherView): number {
  const t = view.info.startedAt ? Date.parse(view.info.startedAt) : Number.NaN;
  return Number.isNaN(t) ? Number.MAX_SAFE_INTEGER : t;
}
