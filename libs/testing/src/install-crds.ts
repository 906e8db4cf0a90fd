/**
 * Test and bench support (never imported by production code): installs KubeVirt's CRDs (@kvt/api) into an API
 * server and waits until it serves the kinds virt-controller watches.
 */
import {
  customResourceDefinitions,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachineInstanceMigration,
} from "@kvt/api";
import { KUBEVIRT_V1, type KubeObject, type RestClient, resourceClient } from "@kvt/kube";
import { eventually } from "./eventually.ts";

/** Creates every KubeVirt CRD through `transport`, then waits (up to `timeoutMs`) until VMs, VMIs and VMIMs list. */
export async function installKubeVirtCrds(transport: RestClient, timeoutMs = 20_000): Promise<void> {
  const crds = resourceClient<KubeObject>(transport, {
    group: "apiextensions.k8s.io",
    version: "v1",
    plural: "customresourcedefinitions",
    kind: "CustomResourceDefinition",
    namespaced: false,
  });
  for (const crd of customResourceDefinitions()) await crds.create(crd);
  const served = [
    resourceClient<VirtualMachine>(transport, KUBEVIRT_V1.virtualMachines),
    resourceClient<VirtualMachineInstance>(transport, KUBEVIRT_V1.virtualMachineInstances),
    resourceClient<VirtualMachineInstanceMigration>(transport, KUBEVIRT_V1.virtualMachineInstanceMigrations),
  ];
  await eventually(
    async () => {
      for (const client of served) await client.list("default");
      return true;
    },
    { timeoutMs, what: "KubeVirt's CRDs to be served" },
  );
}
