/**
 * Where the launcher gets its VMI at start-up: a file (`--vmi FILE`, JSON or YAML), the API server
 * (`--namespace NS --name NAME` with a kubeconfig), or nowhere (identity flags only: the handler's first sync
 * carries the VMI, as KubeVirt's SyncVirtualMachine does). The launcher Pod virt-controller renders uses the last
 * form, so the API client (@kvt/kube and @kubernetes/client-node: ~900 modules, about a CPU-second and 100 MiB per
 * launcher) and the YAML parser are imported only by the branches that need them.
 */
import { readFileSync } from "node:fs";
import type { VirtualMachineInstance } from "@kvt/api";

/** The launcher's VMI identity, and the VMI itself when it was available at start-up. */
export interface VmiSource {
  readonly identity: { namespace: string; name: string; uid: string };
  readonly vmi?: VirtualMachineInstance;
}

/** Start-up arguments that name the VMI. */
export interface VmiArgs {
  readonly vmiFile?: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly uid?: string;
  readonly kubeconfig?: string;
}

/** Bad or missing start-up arguments; main() prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** Resolves the VMI per the arguments. */
export async function loadVmi(args: VmiArgs): Promise<VmiSource> {
  if (args.vmiFile) return fromObject(await parseVmiText(readFileSync(args.vmiFile, "utf8"), args.vmiFile));
  if (!args.namespace || !args.name) {
    throw new UsageError("name the VMI: --vmi FILE, or --namespace NS --name NAME (with --uid or --kubeconfig)");
  }
  if (args.kubeconfig) {
    const { KUBEVIRT_V1, loadKubeConfig, RestClient, resourceClient } = await import("@kvt/kube");
    const client = resourceClient<VirtualMachineInstance & { metadata: { name: string } }>(
      new RestClient(loadKubeConfig({ kubeconfig: args.kubeconfig }), { userAgent: "virt-launcher" }),
      KUBEVIRT_V1.virtualMachineInstances,
    );
    const vmi = await client.get(args.namespace, args.name);
    if (args.uid && vmi.metadata?.uid !== args.uid) {
      throw new UsageError(`VMI ${args.namespace}/${args.name} has uid ${vmi.metadata?.uid ?? "?"}, not ${args.uid}`);
    }
    return fromObject(vmi);
  }
  if (!args.uid) throw new UsageError("--uid is required when the VMI is not read from a file or the API");
  return { identity: { namespace: args.namespace, name: args.name, uid: args.uid } };
}

async function parseVmiText(text: string, file: string): Promise<VirtualMachineInstance> {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    try {
      const { parse: parseYaml } = await import("yaml");
      value = parseYaml(text) as unknown; // YAML is a superset of JSON: only what JSON.parse refused gets here
    } catch (error) {
      throw new UsageError(`${file} is neither JSON nor YAML: ${(error as Error).message}`);
    }
  }
  if (typeof value !== "object" || value === null || (value as { kind?: unknown }).kind !== "VirtualMachineInstance") {
    throw new UsageError(`${file} does not hold a VirtualMachineInstance`);
  }
  return value as VirtualMachineInstance;
}

function fromObject(vmi: VirtualMachineInstance): VmiSource {
  const name = vmi.metadata?.name;
  if (!name) throw new UsageError("the VMI has no metadata.name");
  return {
    identity: { namespace: vmi.metadata?.namespace ?? "default", name, uid: vmi.metadata?.uid ?? name },
    vmi,
  };
}
