import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { Store } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";
import { NodeAuthorizer, nodeOf, podReferences } from "./node-authorizer.ts";
import type { Attributes, Authorizer } from "./rbac.ts";

const allowAll: Authorizer = { authorize: () => ({ allowed: true, reason: "next" }), rulesFor: () => [] };
const store = Store.open({ logger: pino({ level: "silent" }) });
afterAll(() => store.close());

const pod = (name: string, nodeName: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "ns" },
  spec: { nodeName, ...spec },
});

store.put(
  "core/pods",
  "ns/launcher",
  pod("launcher", "node01", {
    serviceAccountName: "robot",
    imagePullSecrets: [{ name: "pull" }],
    containers: [{ name: "c", env: [{ name: "X", valueFrom: { secretKeyRef: { name: "env-secret", key: "k" } } }] }],
    volumes: [
      { name: "disk", persistentVolumeClaim: { claimName: "data" } },
      { name: "proj", projected: { sources: [{ configMap: { name: "kube-root-ca.crt" } }] } },
    ],
  }),
);
store.put("core/persistentvolumeclaims", "ns/data", {
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name: "data", namespace: "ns" },
  spec: { volumeName: "pv-data" },
});

const kubelet = (node: string) => ({
  username: `system:node:${node}`,
  groups: ["system:nodes", "system:authenticated"],
});
const get = (node: string, resource: string, name: string, more: Partial<Attributes> = {}): Attributes => ({
  user: kubelet(node),
  verb: "get",
  resourceRequest: true,
  apiGroup: "",
  namespace: resource === "persistentvolumes" ? undefined : "ns",
  resource,
  name,
  ...more,
});

describe("NodeAuthorizer", () => {
  const authz = new NodeAuthorizer(store, allowAll);

  it("knows a kubelet by user and group", () => {
    expect(nodeOf(kubelet("node01"))).toBe("node01");
    expect(nodeOf({ username: "system:node:node01", groups: [] })).toBeUndefined();
    expect(nodeOf({ username: "alice", groups: ["system:nodes"] })).toBeUndefined();
  });

  it("reads what a pod references: volumes, projected sources, env, pull secrets, account, claim, volume", () => {
    expect(podReferences(store.get("core/pods", "ns/launcher")!.obj)).toEqual({
      secrets: new Set(["pull", "env-secret"]),
      configmaps: new Set(["kube-root-ca.crt"]),
      persistentvolumeclaims: new Set(["data"]),
      serviceaccounts: new Set(["robot"]),
    });
  });

  it.each([
    ["secrets", "env-secret", true],
    ["secrets", "pull", true],
    ["secrets", "other", false],
    ["configmaps", "kube-root-ca.crt", true],
    ["persistentvolumeclaims", "data", true],
    ["persistentvolumes", "pv-data", true],
    ["persistentvolumes", "pv-other", false],
    ["serviceaccounts", "robot", true],
    ["serviceaccounts", "default", false],
  ])("node01 get %s %s: %s", (resource, name, allowed) => {
    expect(authz.authorize(get("node01", resource, name)).allowed).toBe(allowed);
    expect(authz.authorize(get("node02", resource, name)).allowed).toBe(false);
  });

  it("allows the token of a referenced account, never a list, and leaves others to the next authorizer", () => {
    const token = { verb: "create", subresource: "token" };
    expect(authz.authorize(get("node01", "serviceaccounts", "robot", token)).allowed).toBe(true);
    expect(authz.authorize(get("node01", "serviceaccounts", "default", token)).allowed).toBe(false);
    expect(authz.authorize(get("node01", "secrets", "", { verb: "list", name: undefined }))).toEqual({
      allowed: false,
      reason: "can only get individual resources of this type",
    });
    expect(authz.authorize(get("node01", "pods", "p")).reason).toBe("next");
    const alice = { ...get("node01", "secrets", "other"), user: { username: "alice", groups: [] } };
    expect(authz.authorize(alice).reason).toBe("next");
  });
});
