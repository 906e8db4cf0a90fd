import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ApiError, isConflict, isNotFound } from "../errors.ts";
import { kubeConfigFor } from "./kube-config.ts";
import { resourceClient } from "./resource-client.ts";
import { RestClient } from "./rest-client.ts";
import { startTestServer, type TestServer } from "./test-server.ts";

const vmis = {
  group: "kubevirt.io",
  version: "v1",
  plural: "virtualmachineinstances",
  kind: "VirtualMachineInstance",
  namespaced: true,
};

describe("resourceClient over RestClient", () => {
  let server: TestServer;
  let registry: Registry;
  beforeEach(async () => {
    server = await startTestServer();
    registry = new Registry();
  });
  afterEach(() => server.close());

  it("sends JSON patches as application/json-patch+json to the status subresource", async () => {
    server.handle = (req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ metadata: { name: "a" }, echoed: JSON.parse(req.body) as unknown }));
    };
    const client = resourceClient(new RestClient(kubeConfigFor(server.url), { registry }), vmis);
    await client.patch("d", "a", [{ op: "test", path: "/status/phase", value: "Pending" }], "status");
    const req = server.requests.at(-1)!;
    expect(req.method).toBe("PATCH");
    expect(req.url).toBe("/apis/kubevirt.io/v1/namespaces/d/virtualmachineinstances/a/status");
    expect(req.contentType).toBe("application/json-patch+json");
    expect(JSON.parse(req.body)).toEqual([{ op: "test", path: "/status/phase", value: "Pending" }]);
    const host = new URL(server.url).host;
    const text = await registry.metrics();
    expect(text).toContain(
      `kubevirt_rest_client_requests_total{code="200",method="PATCH",host="${host}",resource="virtualmachineinstances/status",verb="PATCH"} 1`,
    );
    expect(text).toContain(
      'kubevirt_rest_client_request_latency_seconds_count{verb="PATCH",url="/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}/status"} 1',
    );
  });

  it("creates with apiVersion and kind filled in, and deletes with preconditions", async () => {
    server.handle = (_req, res) => {
      res.writeHead(201, { "content-type": "application/json" });
      res.end("{}");
    };
    const client = resourceClient(new RestClient(kubeConfigFor(server.url)), vmis);
    await client.create({ metadata: { name: "a", namespace: "d" } });
    expect(JSON.parse(server.requests.at(-1)!.body)).toMatchObject({
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
    });
    await client.delete("d", "a", { preconditions: { uid: "u1" } });
    expect(JSON.parse(server.requests.at(-1)!.body)).toMatchObject({
      kind: "DeleteOptions",
      preconditions: { uid: "u1" },
    });
  });

  it("POSTs a Binding to pods/NAME/binding and resolves to the answer", async () => {
    server.handle = (req, res) => {
      res.writeHead(201, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", status: "Success", echoed: JSON.parse(req.body) as unknown }));
    };
    const pods = resourceClient(new RestClient(kubeConfigFor(server.url)), {
      group: "",
      version: "v1",
      plural: "pods",
      kind: "Pod",
      namespaced: true,
    });
    const binding = {
      apiVersion: "v1",
      kind: "Binding",
      metadata: { name: "p1", namespace: "d", uid: "u1" },
      target: { apiVersion: "v1", kind: "Node", name: "node01" },
    };
    const answer = await pods.createSubresource<{ status: string; echoed: unknown }>("d", "p1", "binding", binding);
    const req = server.requests.at(-1)!;
    expect(req.method).toBe("POST");
    expect(req.url).toBe("/api/v1/namespaces/d/pods/p1/binding");
    expect(req.contentType).toBe("application/json");
    expect(answer).toEqual({ kind: "Status", status: "Success", echoed: binding });
  });

  it("turns error answers into ApiError carrying the Status", async () => {
    const client = resourceClient(new RestClient(kubeConfigFor(server.url)), vmis);
    const err = await client.get("d", "missing").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(isNotFound(err)).toBe(true);
    server.handle = (_req, res) => {
      res.writeHead(409, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ kind: "Status", code: 409, reason: "Conflict", message: "the object has been modified" }),
      );
    };
    const conflict = await client
      .update({ metadata: { name: "a", namespace: "d", resourceVersion: "1" } })
      .catch((e: unknown) => e);
    expect(isConflict(conflict)).toBe(true);
    expect((conflict as ApiError).message).toContain("the object has been modified");
  });
});
