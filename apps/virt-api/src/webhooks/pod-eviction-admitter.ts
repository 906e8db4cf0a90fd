/**
 * `/pod-eviction-validate` (webhooks `virt-launcher-eviction-interceptor.kubevirt.io` and
 * `hotplug-pod-eviction-interceptor.kubevirt.io`, on pods/eviction): KubeVirt's pod-eviction admitter. An eviction of
 * a VMI's launcher pod whose eviction strategy wants the VMI moved is turned into an evacuation:
 *
 *   pod missing, not a launcher, or completed                 -> allow
 *   hotplug volume pod of a running VMI's launcher             -> deny "cannot evict hotplug pod: ..."
 *   launcher: strategy (VMI spec, else the KubeVirt CR's spec.configuration.evictionStrategy)
 *     unset / None                                             -> allow (the VMI stops; its VM may restart it)
 *     LiveMigrate, VMI not LiveMigratable                      -> deny "... is configured with an eviction strategy
 *                                                                 but is not live-migratable"
 *     LiveMigrateIfPossible, not LiveMigratable                -> allow
 *     LiveMigrate(IfPossible) and migratable, or External      -> evacuate:
 *        already marked (status.evacuationNodeName)            -> deny "Evacuation in progress: Eviction triggered
 *                                                                 evacuation of VMI "ns/name""
 *        pod not on the VMI's node (a migration target)        -> deny "Eviction request for target Pod"
 *        otherwise: patch status.evacuationNodeName = node     -> deny "Eviction triggered evacuation of VMI ..."
 *
 * Every denial is a 429, so `kubectl drain` retries every 5 s until the pod completes (migrated away) and the
 * eviction goes through. virt-controller's evacuation controller creates the migration for a marked VMI.
 */
import {
  ANNOTATION,
  activeKubeVirt,
  type EvictionStrategy,
  isMigratable,
  type JsonPatchOp,
  type KubeVirt,
  LABEL,
  type VirtualMachineInstance,
  vmiEvictionStrategy,
} from "@kvt/api";
import { CORE_V1, KUBEVIRT_V1, type KubeList, type RestTransport, resourcePath } from "@kvt/kube";
import { getIfExists } from "../kube/cluster-client.ts";
import { type AdmissionRequest, type AdmitResult, type Admitter, ALLOW, pointerToken } from "./admission.ts";

/** A Pod, as far as the admitter reads it. */
export interface EvictionPod {
  metadata: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { name: string; kind?: string }[];
  };
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

/** What the admitter reads and writes (as virt-api). Missing objects are `undefined`; other failures throw. */
export interface EvictionCluster {
  getPod(namespace: string, name: string): Promise<EvictionPod | undefined>;
  getVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined>;
  patchVmi(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void>;
  /** The KubeVirt CR's `spec.configuration.evictionStrategy` (the cluster default). */
  clusterEvictionStrategy(): Promise<EvictionStrategy | undefined>;
}

/** The annotation the descheduler sets on its Eviction objects, and its value. */
export const REQUESTED_BY = "requested-by";
export const REQUESTED_BY_DESCHEDULER = "sigs.k8s.io/descheduler";

/** What an eviction of a launcher pod should do (pure; KubeVirt's decision table). */
export type LauncherDecision =
  | { readonly kind: "allow" }
  | { readonly kind: "deny"; readonly message: string }
  | { readonly kind: "evacuate"; readonly node: string; readonly message: string };

/** Decides an eviction of `pod`, the launcher of `vmi`, under `strategy`. */
export function decideLauncherEviction(
  vmi: VirtualMachineInstance,
  pod: EvictionPod,
  strategy: EvictionStrategy | undefined,
): LauncherDecision {
  const name = vmi.metadata?.name ?? "";
  let evacuate = false;
  switch (strategy) {
    case "LiveMigrate":
      if (!isMigratable(vmi))
        return {
          kind: "deny",
          message: `VMI ${name} is configured with an eviction strategy but is not live-migratable`,
        };
      evacuate = true;
      break;
    case "LiveMigrateIfPossible":
      evacuate = isMigratable(vmi);
      break;
    case "External":
      evacuate = true;
      break;
    default:
      break;
  }
  if (!evacuate) return { kind: "allow" };
  const triggered = `Eviction triggered evacuation of VMI "${vmi.metadata?.namespace ?? ""}/${name}"`;
  if (vmi.status?.evacuationNodeName) return { kind: "deny", message: `Evacuation in progress: ${triggered}` };
  const node = pod.spec?.nodeName ?? "";
  if ((vmi.status?.nodeName ?? "") !== node) return { kind: "deny", message: "Eviction request for target Pod" };
  return { kind: "evacuate", node, message: triggered };
}

function denied(message: string): AdmitResult {
  return { allowed: false, code: 429, message };
}

const completed = (pod: EvictionPod): boolean => pod.status?.phase === "Failed" || pod.status?.phase === "Succeeded";
const isLauncher = (pod: EvictionPod): boolean => pod.metadata.labels?.[LABEL.app] === "virt-launcher";
const isHotplug = (pod: EvictionPod): boolean =>
  pod.metadata.labels?.[LABEL.app] === "hotplug-disk" && pod.metadata.ownerReferences?.length === 1;

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** `virtualmachineinstances.kubevirt.io "x" not found`, as client-go prints a 404. */
const vmiNotFound = (name: string): string => `virtualmachineinstances.kubevirt.io "${name}" not found`;

interface EvictionObject {
  metadata?: { annotations?: Record<string, string> };
  deleteOptions?: { dryRun?: unknown };
}

function dryRunOf(req: AdmissionRequest, eviction: EvictionObject): boolean {
  if (req.dryRun === true) return true;
  const d = eviction.deleteOptions?.dryRun;
  return Array.isArray(d) && d[0] === "All";
}

function markPatch(vmi: VirtualMachineInstance, node: string, descheduler: boolean): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [{ op: "add", path: "/status/evacuationNodeName", value: node }];
  if (!descheduler) return ops;
  const annotations = vmi.metadata?.annotations ?? {};
  if (Object.keys(annotations).length === 0)
    ops.push({ op: "add", path: "/metadata/annotations", value: { [ANNOTATION.evictionSource]: "descheduler" } });
  else
    ops.push({
      op: "add",
      path: `/metadata/annotations/${pointerToken(ANNOTATION.evictionSource)}`,
      value: "descheduler",
    });
  return ops;
}

async function admitHotplugPod(cluster: EvictionCluster, pod: EvictionPod): Promise<AdmitResult> {
  const ns = pod.metadata.namespace ?? "";
  let owner: EvictionPod | undefined;
  try {
    owner = await cluster.getPod(ns, pod.metadata.ownerReferences?.[0]?.name ?? "");
  } catch (err) {
    return denied(`failed getting owner for hotplug pod: ${errorText(err)}`);
  }
  if (!owner || !isLauncher(owner) || completed(owner)) return ALLOW;
  const vmiName = owner.metadata.annotations?.[ANNOTATION.domain];
  if (!vmiName) return ALLOW;
  try {
    if (!(await cluster.getVmi(ns, vmiName))) return ALLOW;
  } catch (err) {
    return denied(`kubevirt failed getting the vmi: ${errorText(err)}`);
  }
  return denied(
    `cannot evict hotplug pod: ${pod.metadata.name ?? ""} associated with running vmi: ${vmiName} in namespace ${ns}`,
  );
}

async function admitLauncherPod(
  cluster: EvictionCluster,
  req: AdmissionRequest,
  pod: EvictionPod,
): Promise<AdmitResult> {
  const vmiName = pod.metadata.annotations?.[ANNOTATION.domain];
  if (!vmiName) return ALLOW;
  const ns = req.namespace ?? "";
  let vmi: VirtualMachineInstance | undefined;
  let strategy: EvictionStrategy | undefined;
  try {
    vmi = await cluster.getVmi(ns, vmiName);
    if (vmi) strategy = vmiEvictionStrategy(vmi, { evictionStrategy: await cluster.clusterEvictionStrategy() });
  } catch (err) {
    return denied(`kubevirt failed getting the vmi: ${errorText(err)}`);
  }
  if (!vmi) return denied(`kubevirt failed getting the vmi: ${vmiNotFound(vmiName)}`);
  const decision = decideLauncherEviction(vmi, pod, strategy);
  if (decision.kind === "allow") return ALLOW;
  if (decision.kind === "deny") return denied(decision.message);
  const eviction = (req.object ?? {}) as EvictionObject;
  const descheduler = eviction.metadata?.annotations?.[REQUESTED_BY] === REQUESTED_BY_DESCHEDULER;
  try {
    await cluster.patchVmi(ns, vmiName, markPatch(vmi, decision.node, descheduler), dryRunOf(req, eviction));
  } catch (err) {
    // As in KubeVirt, the caller retries the eviction (a drain does, every 5 s).
    return denied(`kubevirt failed marking the vmi for eviction: ${errorText(err)}`);
  }
  return denied(decision.message);
}

/** The `/pod-eviction-validate` admitter over `cluster`. */
export function validatePodEviction(cluster: EvictionCluster): Admitter {
  return async (req) => {
    let pod: EvictionPod | undefined;
    try {
      pod = await cluster.getPod(req.namespace ?? "", req.name ?? "");
    } catch {
      // KubeVirt lets the eviction through when the pod cannot be read; the API server then answers for the pod.
      return ALLOW;
    }
    if (!pod) return ALLOW;
    if (isHotplug(pod)) return admitHotplugPod(cluster, pod);
    if (isLauncher(pod) && !completed(pod)) return admitLauncherPod(cluster, req, pod);
    return ALLOW;
  };
}

/** {@link EvictionCluster} over the API server as virt-api; VMIs through `vmis`, the KubeVirt CR in `namespace`. */
export class RestEvictionCluster implements EvictionCluster {
  readonly #transport: RestTransport;
  readonly #vmis: Pick<EvictionCluster, "getVmi" | "patchVmi">;
  readonly #namespace: string;

  constructor(transport: RestTransport, vmis: Pick<EvictionCluster, "getVmi" | "patchVmi">, namespace: string) {
    this.#transport = transport;
    this.#vmis = vmis;
    this.#namespace = namespace;
  }

  getPod(namespace: string, name: string): Promise<EvictionPod | undefined> {
    return getIfExists(this.#transport, { path: resourcePath(CORE_V1.pods, namespace, name) });
  }

  getVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined> {
    return this.#vmis.getVmi(namespace, name);
  }

  patchVmi(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#vmis.patchVmi(namespace, name, patch, dryRun);
  }

  async clusterEvictionStrategy(): Promise<EvictionStrategy | undefined> {
    const path = resourcePath(KUBEVIRT_V1.kubevirts, this.#namespace);
    const list = await getIfExists<Partial<KubeList<KubeVirt>>>(this.#transport, { path });
    const config = activeKubeVirt(list?.items ?? [])?.spec.configuration as
      | { evictionStrategy?: EvictionStrategy }
      | undefined;
    return config?.evictionStrategy;
  }
}
