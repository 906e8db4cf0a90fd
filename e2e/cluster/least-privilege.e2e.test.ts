/**
 * Least privilege on the running local cluster: each component's own kubeconfig (the one its process runs with)
 * may do what its role grants (deploy/'s for KubeVirt's components, the bootstrap roles for the scheduler, the
 * service proxy and the kubelets) and nothing else, as kube-apiserver answers it; the admin kubeconfig stays kubectl's alone, and the
 * API server's database is its user's alone. Before RBAC, every one of these tokens could do anything. A namespace
 * viewer's ServiceAccount token reaches a VM's expand-spec through virt-api, which acts as that caller, extras and
 * all (virt-api's impersonation rules), and may not stop it.
 */
import { readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { kubectl } from "../lib/cli.ts";
import { testGuestVm } from "../lib/manifests.ts";

const kubeconfig = inject("kubeconfig");
const dir = dirname(kubeconfig);
const own = (name: string): string => join(dir, `kubeconfig-${name}`);

/** `kubectl auth can-i` with a component's kubeconfig: "yes" or "no" (kubectl may add " - <reason>"). */
async function can(who: string, args: string[]): Promise<string> {
  const r = await kubectl(own(who), ["auth", "can-i", ...args]);
  return r.stdout.trim().split(" ")[0] ?? "";
}

describe("each component under its own identity, with least privilege", () => {
  it("no component kubeconfig carries the admin token", () => {
    const token = (f: string): string => /token: (\S+)/.exec(readFileSync(f, "utf8"))?.[1] ?? "";
    const admin = token(kubeconfig);
    const names = [
      "kubevirt-apiserver",
      "kubevirt-controller",
      "kubevirt-handler",
      "scheduler",
      "kube-proxy",
      "node-node01",
    ];
    for (const n of names) {
      expect(token(own(n)), n).not.toBe("");
      expect(token(own(n)), n).not.toBe(admin);
    }
  });

  it.each([
    ["kubevirt-handler", ["list", "secrets", "--all-namespaces"], "no"],
    // The migration secret goes handler to handler over mutual TLS: virt-handler reads no Secret, by name either.
    ["kubevirt-handler", ["get", "secrets/kubevirt-migration-x", "-n", "default"], "no"],
    ["kubevirt-handler", ["create", "secrets", "-n", "default"], "no"],
    ["kubevirt-handler", ["create", "namespaces"], "no"],
    ["kubevirt-handler", ["delete", "namespaces"], "no"],
    ["kubevirt-handler", ["patch", "virtualmachineinstances.kubevirt.io"], "yes"],
    ["kubevirt-controller", ["create", "pods"], "yes"],
    ["kubevirt-controller", ["list", "secrets", "--all-namespaces"], "no"],
    // The certificate manager: its own Secrets by name, in the install namespace only; no other Secret.
    ["kubevirt-controller", ["get", "secrets/kubevirt-virt-api-certs", "-n", "kubevirt"], "yes"],
    ["kubevirt-controller", ["update", "secrets/kubevirt-ca", "-n", "kubevirt"], "yes"],
    ["kubevirt-controller", ["get", "secrets/other", "-n", "kubevirt"], "no"],
    ["kubevirt-controller", ["list", "secrets", "-n", "kubevirt"], "no"],
    ["kubevirt-controller", ["create", "secrets", "-n", "default"], "no"],
    ["kubevirt-controller", ["update", "configmaps/kubevirt-ca", "-n", "kubevirt"], "yes"],
    ["kubevirt-controller", ["update", "validatingwebhookconfigurations/virt-api-validator"], "yes"],
    ["kubevirt-controller", ["update", "validatingwebhookconfigurations/other"], "no"],
    ["kubevirt-controller", ["update", "apiservices.apiregistration.k8s.io/v1.subresources.kubevirt.io"], "yes"],
    ["kubevirt-apiserver", ["get", "secrets"], "no"],
    // virt-api and virt-handler watch the KubeVirt CA bundle by name, and read no other ConfigMap.
    ["kubevirt-apiserver", ["watch", "configmaps/kubevirt-ca", "-n", "kubevirt"], "yes"],
    ["kubevirt-apiserver", ["list", "configmaps", "-n", "kubevirt"], "no"],
    ["kubevirt-handler", ["watch", "configmaps/kubevirt-ca", "-n", "kubevirt"], "yes"],
    ["kubevirt-handler", ["get", "configmaps/kubevirt-ca", "-n", "kubevirt"], "no"],
    ["kubevirt-handler", ["list", "configmaps/other", "-n", "kubevirt"], "no"],
    ["scheduler", ["delete", "pods"], "no"],
    ["scheduler", ["create", "pods", "--subresource=binding"], "yes"],
    ["kube-proxy", ["watch", "endpointslices.discovery.k8s.io", "--all-namespaces"], "yes"],
    ["kube-proxy", ["create", "services"], "no"],
    ["kube-proxy", ["list", "secrets", "--all-namespaces"], "no"],
    ["node-node01", ["list", "secrets", "--all-namespaces"], "no"],
    ["node-node01", ["patch", "nodes", "--subresource=status"], "yes"],
  ])("%s: can-i %j is %s", async (who, args, answer) => {
    expect(await can(who, args)).toBe(answer);
  });

  it("a denied request is kube-apiserver's 403, and an impersonated ServiceAccount cannot read Secrets", async () => {
    const r = await kubectl(own("kubevirt-handler"), ["get", "secrets", "--all-namespaces"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:kubevirt:kubevirt-handler" cannot list resource "secrets" in API group "" at the cluster scope',
    );
    const sa = await kubectl(kubeconfig, ["get", "secrets", "--as=system:serviceaccount:default:default"]);
    expect(sa.stderr.trim()).toBe(
      'Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:default:default" cannot list resource "secrets" in API group "" in the namespace "default"',
    );
  });

  it("a viewer's ServiceAccount reads a VM's expand-spec through virt-api as itself, and may not stop the VM", async () => {
    const ns = "kvt-least-privilege";
    const ok = async (args: string[], input?: string): Promise<string> => {
      const r = await kubectl(kubeconfig, args, input);
      expect(r.code, `kubectl ${args.join(" ")}: ${r.stderr}`).toBe(0);
      return r.stdout;
    };
    const viewer = [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "viewer", namespace: ns } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "viewer", namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "view" },
        subjects: [{ kind: "ServiceAccount", name: "viewer", namespace: ns }],
      },
    ];
    await ok(["create", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: viewer }));
    const small = {
      apiVersion: "instancetype.kubevirt.io/v1beta1",
      kind: "VirtualMachineInstancetype",
      metadata: { name: "lp-small", namespace: ns },
      spec: { cpu: { guest: 1 }, memory: { guest: "64Mi" } },
    };
    const vm = testGuestVm("lp-vm", { runStrategy: "Halted" }) as {
      metadata: Record<string, unknown>;
      spec: { instancetype?: unknown; template: { spec: { domain: { resources?: unknown } } } };
    };
    vm.metadata.namespace = ns;
    vm.spec.instancetype = { kind: "VirtualMachineInstancetype", name: "lp-small" };
    delete vm.spec.template.spec.domain.resources;
    await ok(["create", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: [small, vm] }));
    // A TokenRequest token: its user carries the credential-id extra, which virt-api impersonates too.
    const token = (await ok(["create", "token", "viewer", "-n", ns])).trim();
    const path = `/apis/subresources.kubevirt.io/v1/namespaces/${ns}/virtualmachines/lp-vm`;
    const expanded = JSON.parse(await ok(["--token", token, "get", "--raw", `${path}/expand-spec`])) as {
      spec: { template: { spec: { domain: { memory?: { guest?: string } } } } };
    };
    expect(expanded.spec.template.spec.domain.memory?.guest).toBe("64Mi");
    const stop = await kubectl(kubeconfig, ["--token", token, "replace", "--raw", `${path}/stop`, "-f", "-"], "{}");
    expect(stop.code).toBe(1);
    expect(stop.stderr).toContain(
      `User "system:serviceaccount:${ns}:viewer" cannot update resource "virtualmachines/stop" in API group "subresources.kubevirt.io"`,
    );
    await ok(["delete", "namespace", ns, "--wait=false"]);
  });

  it("keeps the API server's data directory and database to its own user", () => {
    expect((statSync(join(dir, "apiserver")).mode & 0o777).toString(8)).toBe("700");
    expect((statSync(join(dir, "apiserver", "state.db")).mode & 0o777).toString(8)).toBe("600");
  });
});
