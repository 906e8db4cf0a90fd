/**
 * virt-api's request bodies: the size limit (413) and the nesting limit (400) on the webhooks and the
 * subresources, never a 500 or a crash; a deep but allowed value still gets an answer from every admitter.
 */
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exceedsDepth, MAX_REQUEST_BODY_BYTES as MAX_BODY_BYTES, MAX_JSON_DEPTH } from "@kvt/api";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeCluster, newVm } from "../fake/fake-cluster.ts";
import { HttpHandlerClient, TemplateHandlerLocator } from "../handler/handler-client.ts";
import { webhookRoutes } from "../webhooks/admitters.ts";
import { VirtApiApp } from "./app.ts";

const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/default";
const cluster = new FakeCluster();
let server: Server;
let port: number;

function post(method: string, path: string, body: string): Promise<{ code: number; status: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, method, path, headers: { "content-type": "application/json" } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ code: res.statusCode ?? 0, status: text ? (JSON.parse(text) as Record<string, unknown>) : {} });
        });
      },
    );
    req.on("error", (err: NodeJS.ErrnoException) => (err.code === "EPIPE" ? undefined : reject(err)));
    req.end(body);
  });
}

/** An AdmissionReview for `kind` whose object carries `spec` (raw JSON text). */
function review(kind: string, resource: string, spec: string): string {
  return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"kubevirt.io","version":"v1","kind":"${kind}"},"resource":{"group":"kubevirt.io","version":"v1","resource":"${resource}"},"operation":"CREATE","namespace":"default","name":"x","object":{"apiVersion":"kubevirt.io/v1","kind":"${kind}","metadata":{"name":"x","namespace":"default"},"spec":${spec}}}}`;
}
const deep = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

beforeAll(async () => {
  const app = new VirtApiApp({
    logger: pino({ level: "silent" }),
    clientFor: () => cluster,
    handler: new HttpHandlerClient(new TemplateHandlerLocator("https://localhost:1"), {}),
    webhooks: webhookRoutes(cluster, "kubevirt"),
    version: "0.1.0",
  });
  cluster.addVm(newVm("halted", { runStrategy: "Halted" }));
  server = createServer((req, res) => void app.handle(req, res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe("exceedsDepth", () => {
  it.each([
    { value: 1, depth: 0 },
    { value: {}, depth: 1 },
    { value: { a: [{}] }, depth: 3 },
    { value: JSON.parse(deep(MAX_JSON_DEPTH)) as unknown, depth: MAX_JSON_DEPTH },
    { value: JSON.parse(deep(MAX_JSON_DEPTH + 1)) as unknown, depth: MAX_JSON_DEPTH + 1 },
  ])("a value $depth levels deep", ({ value, depth }) => {
    expect(exceedsDepth(value)).toBe(depth > MAX_JSON_DEPTH);
    expect(exceedsDepth(value, depth)).toBe(false);
    if (depth > 0) expect(exceedsDepth(value, depth - 1)).toBe(true);
  });
});

const webhooks = [
  { path: "/virtualmachines-validate", kind: "VirtualMachine", resource: "virtualmachines" },
  { path: "/virtualmachines-mutate", kind: "VirtualMachine", resource: "virtualmachines" },
  {
    path: "/virtualmachineinstances-validate-create",
    kind: "VirtualMachineInstance",
    resource: "virtualmachineinstances",
  },
  { path: "/virtualmachineinstances-mutate", kind: "VirtualMachineInstance", resource: "virtualmachineinstances" },
  {
    path: "/migration-validate-create",
    kind: "VirtualMachineInstanceMigration",
    resource: "virtualmachineinstancemigrations",
  },
  { path: "/migration-policy-validate-create", kind: "MigrationPolicy", resource: "migrationpolicies" },
  {
    path: "/virtualmachinereplicaset-validate",
    kind: "VirtualMachineInstanceReplicaSet",
    resource: "virtualmachineinstancereplicasets",
  },
  { path: "/virtualmachinepool-validate", kind: "VirtualMachinePool", resource: "virtualmachinepools" },
];

describe("webhook bodies", () => {
  it.each(webhooks)("$path: a 10^5-deep object is 400, not a 500", async ({ path, kind, resource }) => {
    const r = await post("POST", path, review(kind, resource, deep(100_000)));
    expect(r.code).toBe(400);
    expect(r.status).toMatchObject({
      kind: "Status",
      reason: "BadRequest",
      message: `Can not unmarshal Request body to struct, error: exceeded max depth of ${MAX_JSON_DEPTH}`,
    });
  });
  it.each(webhooks)(
    "$path: an object just under the depth limit gets an answer, not a 500",
    async ({ path, kind, resource }) => {
      const r = await post("POST", path, review(kind, resource, deep(MAX_JSON_DEPTH - 10)));
      expect(r.code).toBe(200);
      expect(r.status).toMatchObject({ kind: "AdmissionReview", response: { uid: "u1" } });
    },
  );
  it("a review carrying a 3 MiB object (the API server's request limit) gets an answer", async () => {
    const r = await post(
      "POST",
      "/virtualmachines-validate",
      review("VirtualMachine", "virtualmachines", `{"x":"${"a".repeat(MAX_BODY_BYTES)}"}`),
    );
    expect(r.code).toBe(200);
    expect(r.status).toMatchObject({ kind: "AdmissionReview", response: { uid: "u1" } });
  });
  it("a review over 9 MiB (object and old object at the request limit, and more) is 413", async () => {
    const r = await post(
      "POST",
      "/virtualmachines-validate",
      review("VirtualMachine", "virtualmachines", `{"x":"${"a".repeat(3 * MAX_BODY_BYTES)}"}`),
    );
    expect(r.code).toBe(413);
    expect(r.status).toMatchObject({
      reason: "RequestEntityTooLarge",
      message: "Request entity too large: limit is 9437184",
    });
  });
});

describe("subresource bodies", () => {
  it.each([
    { action: "start", body: deep(100_000), code: 400 },
    { action: "stop", body: `[${"[".repeat(100_000)}${"]".repeat(100_000)}]`, code: 400 },
    { action: "start", body: `{"x":"${"a".repeat(MAX_BODY_BYTES)}"}`, code: 413 },
  ])("$action with a bad body is $code, and changes nothing", async ({ action, body, code }) => {
    const r = await post("PUT", `${SUB}/virtualmachines/halted/${action}`, body);
    expect(r.code).toBe(code);
    expect(cluster.vms.get("default/halted")?.spec.runStrategy).toBe("Halted");
  });
});
