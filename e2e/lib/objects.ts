/** Reads VMs, VMIs and pods through kubectl for assertions (typed loosely: tests assert on fields). */
import { getJson, kubectl } from "./cli.ts";

/** The fields of a VMI the tests look at. */
export interface VmiView {
  metadata: {
    name: string;
    uid: string;
    ownerReferences?: { uid: string; kind: string; controller?: boolean }[];
    labels?: Record<string, string>;
  };
  spec: { domain: { firmware?: { uuid?: string } }; terminationGracePeriodSeconds?: number };
  status?: {
    phase?: string;
    nodeName?: string;
    reason?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    activePods?: Record<string, string>;
    migrationState?: {
      migrationUid?: string;
      completed?: boolean;
      failed?: boolean;
      failureReason?: string;
      abortRequested?: boolean;
      abortStatus?: string;
      startTimestamp?: string;
      sourceNode?: string;
      targetNode?: string;
      migrationPolicyName?: string;
    };
  };
}

/** The fields of a VM the tests look at. */
export interface VmView {
  metadata: { name: string; uid: string };
  status?: { created?: boolean; ready?: boolean; printableStatus?: string };
}

/** The VMI `name`, or undefined when it does not exist. */
export async function vmiOrUndefined(kubeconfig: string, name: string): Promise<VmiView | undefined> {
  const r = await kubectl(kubeconfig, ["get", "vmi", name, "-o", "json"]);
  if (r.code !== 0) {
    if (/NotFound|not found/.test(r.stderr)) return undefined;
    throw new Error(`kubectl get vmi ${name}: ${r.stderr}`);
  }
  return JSON.parse(r.stdout) as VmiView;
}

/** The VM `name`. */
export function vm(kubeconfig: string, name: string): Promise<VmView> {
  return getJson<VmView>(kubeconfig, "vm", name);
}

/** A pod as the tests see it. */
export interface PodView {
  metadata: { name: string; uid: string; creationTimestamp: string };
  spec: {
    nodeName?: string;
    containers?: {
      name: string;
      resources?: { limits?: Record<string, string>; requests?: Record<string, string> };
      volumeDevices?: { name: string; devicePath: string }[];
    }[];
  };
  status?: { phase?: string };
}

/** The launcher pods of the VMI with uid `vmiUid` (label kubevirt.io/created-by), oldest first. */
export async function launcherPods(kubeconfig: string, vmiUid: string): Promise<PodView[]> {
  const r = await kubectl(kubeconfig, ["get", "pods", "-l", `kubevirt.io/created-by=${vmiUid}`, "-o", "json"]);
  if (r.code !== 0) throw new Error(`kubectl get pods: ${r.stderr}`);
  const list = JSON.parse(r.stdout) as { items: PodView[] };
  return list.items.sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp));
}
