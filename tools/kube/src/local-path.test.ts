import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { LOCAL_PATH_BINARY, localPathManifests } from "./local-path.ts";

const OPTIONS = {
  image: "10.200.255.1:5000/kubevirt-ts/local-path-provisioner:v0.0.30",
  helperImage: "10.200.255.1:5000/kubevirt-ts/busybox:1.35.0",
  sharedPath: "/d/cluster/storage",
};

interface Rule {
  readonly resources: string[];
  readonly verbs: string[];
}
interface Container {
  readonly image: string;
  readonly command: string[];
  readonly args: string[];
  readonly env: unknown[];
}
/** The fields of the objects the cases read. */
interface Obj {
  readonly data: Record<string, string>;
  readonly rules: Rule[];
  readonly subjects: unknown[];
  readonly spec: {
    readonly template: {
      readonly spec: { containers: Container[]; volumes: unknown[]; serviceAccountName: string };
    };
  };
}
const byKind = (kind: string): Obj => {
  const found = localPathManifests(OPTIONS).find((m) => m.kind === kind);
  if (!found) throw new Error(`no ${kind}`);
  return found as unknown as Obj;
};

describe("localPathManifests", () => {
  it("makes local-path the default class: rancher.io/local-path, WaitForFirstConsumer, Delete", () => {
    expect(localPathManifests(OPTIONS).find((m) => m.kind === "StorageClass")).toEqual({
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "local-path", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
      provisioner: "rancher.io/local-path",
      volumeBindingMode: "WaitForFirstConsumer",
      reclaimPolicy: "Delete",
    });
  });

  it("configures the shared filesystem path (no nodePathMap), so ReadWriteMany claims are provisioned", () => {
    const data = byKind("ConfigMap").data;
    expect(JSON.parse(data["config.json"] ?? "")).toEqual({ sharedFileSystemPath: "/d/cluster/storage" });
    expect(data.setup).toContain('mkdir -m 0777 -p "$VOL_DIR"');
    expect(data.teardown).toContain('rm -rf "$VOL_DIR"');
    const helper = parse(data["helperPod.yaml"] ?? "") as { spec: { containers: unknown[] } };
    expect(helper.spec.containers).toEqual([
      { name: "helper-pod", image: OPTIONS.helperImage, imagePullPolicy: "IfNotPresent" },
    ]);
  });

  it("runs the provisioner from the lane's image with the config map mounted and its namespace", () => {
    const pod = byKind("Deployment").spec.template.spec;
    const [container] = pod.containers;
    expect(container.image).toBe(OPTIONS.image);
    expect(container.command).toEqual([LOCAL_PATH_BINARY, "--debug", "start", "--config", "/etc/config/config.json"]);
    expect(container.args).toEqual(["--helper-image", OPTIONS.helperImage]);
    expect(container.env[0]).toEqual({
      name: "POD_NAMESPACE",
      valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } },
    });
    expect(pod.volumes).toEqual([{ name: "config-volume", configMap: { name: "local-path-config" } }]);
    expect(pod.serviceAccountName).toBe("local-path-provisioner-service-account");
  });

  it("lets it write PVs and helper pods, and only read claims and nodes", () => {
    const cluster = byKind("ClusterRole").rules;
    const verbs = (resource: string) => cluster.find((r) => r.resources.includes(resource))?.verbs;
    expect(verbs("persistentvolumes")).toContain("create");
    expect(verbs("persistentvolumes")).toContain("delete");
    expect(verbs("persistentvolumeclaims")).toEqual(["get", "list", "watch"]);
    expect(byKind("Role").rules[0]).toMatchObject({ resources: ["pods"], verbs: expect.arrayContaining(["create"]) });
    expect(byKind("ClusterRoleBinding").subjects).toEqual([
      { kind: "ServiceAccount", name: "local-path-provisioner-service-account", namespace: "local-path-storage" },
    ]);
  });

  it("refuses a shared path that is relative or /", () => {
    expect(() => localPathManifests({ ...OPTIONS, sharedPath: "storage" })).toThrow(/absolute directory/);
    expect(() => localPathManifests({ ...OPTIONS, sharedPath: "/" })).toThrow(/absolute directory/);
  });
});
