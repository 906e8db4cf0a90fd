import { describe, expect, it } from "vitest";
import { FakeCluster, newVm, newVmi } from "../fake/fake-cluster.ts";
import { fetchVm, fetchVmi, fetchVmiForVm, getVm, internalOnFailure, type SubresourceTarget } from "./fetch-target.ts";

/** Expects `p` to be refused with an ApiError of `code` and `message`. */
async function expectRefusal(p: Promise<unknown>, code: number, message: string): Promise<void> {
  await expect(p).rejects.toMatchObject({ code, message });
}

/** VM or VMI `vm1` in `default`, read through `cluster`. */
const at = (cluster: FakeCluster): SubresourceTarget => ({ client: cluster, namespace: "default", name: "vm1" });

/** A cluster whose reads fail, as an API server that cannot be reached. */
function unreachable(): FakeCluster {
  const cluster = new FakeCluster();
  cluster.getVm = () => Promise.reject(new Error("connection refused"));
  cluster.getVmi = () => Promise.reject(new Error("connection refused"));
  return cluster;
}

describe("reading the VM or VMI a subresource call is about", () => {
  it("a failed read is a 500 naming what could not be read, as KubeVirt's virt-api", async () => {
    const internal = "Internal error occurred: unable to retrieve";
    await expectRefusal(getVm(at(unreachable())), 500, `${internal} vm [vm1]: connection refused`);
    await expectRefusal(fetchVm(at(unreachable())), 500, `${internal} vm [vm1]: connection refused`);
    await expectRefusal(fetchVmi(at(unreachable())), 500, `${internal} vmi [vm1]: connection refused`);
  });

  it("an absent VM is undefined to getVm and a 404 to fetchVm", async () => {
    expect(await getVm(at(new FakeCluster()))).toBeUndefined();
    await expectRefusal(fetchVm(at(new FakeCluster())), 404, 'virtualmachine.kubevirt.io "vm1" not found');
    const vm = await fetchVm(at(new FakeCluster().addVm(newVm("vm1", { runStrategy: "Always" }))));
    expect(vm.metadata?.uid).toBe("uid-vm-vm1");
  });

  it("fetchVmiForVm: 409 for a VM not started, 500 for a VMI the VM does not own, else the VMI", async () => {
    const stopped = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Halted" }));
    await expectRefusal(
      fetchVmiForVm(at(stopped)),
      409,
      'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": VMI is not started',
    );
    const started = newVm("vm1", { runStrategy: "Always" }, { created: true });
    const foreign = new FakeCluster().addVm(started).addVmi(newVmi("vm1", "Running"));
    await expectRefusal(
      fetchVmiForVm(at(foreign)),
      500,
      "Internal error occurred: unable to retrieve vmi [vm1] for vm: it is not owned by the VM",
    );
    const owned = newVmi("vm1", "Running");
    owned.metadata!.ownerReferences = [
      { apiVersion: "kubevirt.io/v1", kind: "VirtualMachine", name: "vm1", uid: "uid-vm-vm1" },
    ];
    const vmi = await fetchVmiForVm(at(new FakeCluster().addVm(started).addVmi(owned)));
    expect(vmi.metadata?.uid).toBe("uid-vmi-vm1");
  });

  it("internalOnFailure passes a result through and turns a failure into a 500 with its message", async () => {
    expect(await internalOnFailure(() => Promise.resolve(42))).toBe(42);
    await expectRefusal(
      internalOnFailure(() => Promise.reject(new Error("handler gone"))),
      500,
      "Internal error occurred: handler gone",
    );
  });
});
