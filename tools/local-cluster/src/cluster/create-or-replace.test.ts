import { CORE_V1, isNotFound, kubeConfigFromFile, RestClient, resourceClient } from "@kvt/kube";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { createOrReplaceAll } from "./create-or-replace.ts";

const role = (verbs: string[]) => ({
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "ClusterRole",
  metadata: { name: "kvt-test-reader" },
  rules: [{ apiGroups: [""], resources: ["pods"], verbs }],
});
const account = (label: string) => ({
  apiVersion: "v1",
  kind: "ServiceAccount",
  metadata: { name: "kvt-test", namespace: "default", labels: { v: label } },
});

describe("createOrReplaceAll() against the embedded API server", () => {
  let api: ApiServerHandle;
  let transport: RestClient;
  beforeAll(async () => {
    api = await startApiServer({ inMemory: true, tls: false, logger: pino({ level: "silent" }) });
    transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
  });
  afterAll(() => api?.stop());

  it("creates objects of any kind, then replaces them, or keeps them when told to", async () => {
    const keepAccounts = (o: { kind?: string }) => ({ replace: o.kind !== "ServiceAccount" });
    await createOrReplaceAll(transport, [role(["get"]), account("1")], keepAccounts);
    await createOrReplaceAll(transport, [role(["get", "list"]), account("2")], keepAccounts);
    const roles = resourceClient<ReturnType<typeof role>>(transport, {
      group: "rbac.authorization.k8s.io",
      version: "v1",
      plural: "clusterroles",
      kind: "ClusterRole",
      namespaced: false,
    });
    expect((await roles.get("", "kvt-test-reader")).rules[0].verbs).toEqual(["get", "list"]);
    const accounts = resourceClient(transport, CORE_V1.serviceAccounts);
    expect((await accounts.get("default", "kvt-test")).metadata?.labels).toEqual({ v: "1" });
  });

  it("refuses a kind the server does not serve, with NotFound", async () => {
    const error = await createOrReplaceAll(transport, [{ apiVersion: "v1", kind: "Widget", metadata: { name: "w" } }])
      .then(() => undefined)
      .catch((e: unknown) => e);
    expect(isNotFound(error)).toBe(true);
    expect((error as Error).message).toContain('no kind "Widget" in "v1"');
  });
});
