/**
 * The VMI a user gets from the seed's `vm-cirros` example (tools/local-cluster/manifests/vm-cirros.yaml, the VM
 * `npm start` creates), made the way the cluster makes it, without a cluster:
 *
 *   vm-cirros.yaml --defaultVm(CREATE)--> VM (virt-api's VM mutator: firmware uuid/serial, machine type)
 *     --template--> VMI {name, namespace, uid, labels, spec}          (virt-controller's vmi-template.ts, its core)
 *     --defaultVmi--> VMI (virt-api's VMI mutator: memory.guest, topology, default network, disks, grace, Pending)
 *
 * The user data and the containerDisk image are the manifest's, unchanged: the check fails if the manifest stops
 * pointing at the demo image or stops carrying the cloud-init script.
 */
import { readFileSync } from "node:fs";
import { defaultVm, defaultVmi, LABEL, type VirtualMachine, type VirtualMachineInstance } from "@kvt/api";
import { parse as parseYaml } from "yaml";

/** The seed's example VM as the local cluster creates it. */
export const SEED_VM_MANIFEST = new URL("../../local-cluster/manifests/vm-cirros.yaml", import.meta.url).pathname;

/** The containerDisk image the local cluster's vm-cirros runs: the demo image of tools/images. */
export const DEMO_CONTAINER_DISK = "local/demo-linux:latest";

/** Who the VMI is. */
export interface SeedVmiIdentity {
  readonly namespace: string;
  readonly uid: string;
}

/** The VMI of the seed's vm-cirros VM in `namespace` with `uid` (see the diagram above). */
export function seedVmi(
  identity: SeedVmiIdentity,
  manifest = readFileSync(SEED_VM_MANIFEST, "utf8"),
): VirtualMachineInstance {
  const vm = defaultVm({ ...(parseYaml(manifest) as VirtualMachine) }, "CREATE");
  const name = vm.metadata?.name;
  if (!name) throw new Error("the seed's VM has no name");
  const disk = vm.spec.template.spec?.volumes?.find((v) => v.containerDisk)?.containerDisk?.image;
  if (disk !== DEMO_CONTAINER_DISK)
    throw new Error(`the seed's containerDisk is ${JSON.stringify(disk)}, not the demo image ${DEMO_CONTAINER_DISK}`);
  const template = structuredClone(vm.spec.template);
  return defaultVmi({
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: {
      name,
      namespace: identity.namespace,
      uid: identity.uid,
      labels: { ...template.metadata?.labels, [LABEL.vm]: name },
    },
    spec: template.spec ?? { domain: { devices: {} } },
  });
}

/** The cloud-init NoCloud user data of `vmi` (decoded from userDataBase64 when given that way). */
export function userDataOf(vmi: VirtualMachineInstance): string | undefined {
  const noCloud = vmi.spec?.volumes?.find((v) => v.cloudInitNoCloud)?.cloudInitNoCloud;
  if (noCloud?.userData !== undefined) return noCloud.userData;
  return noCloud?.userDataBase64 === undefined ? undefined : Buffer.from(noCloud.userDataBase64, "base64").toString();
}
