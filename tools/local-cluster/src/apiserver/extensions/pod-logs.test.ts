/**
 * `pods/log` through the kubelet, end to end: a real API server (in memory, random port), the process-kubelet's
 * real log endpoint (mutual TLS: the API server's kubelet client certificate), a Node that advertises it, and the
 * real kubectl (`logs`, `-c`, `--tail`, `--limit-bytes`, `-f`).
 */
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateCa, issueCertificate } from "@kvt/certs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLogServer } from "../../kubelet/log-server.ts";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";
import { call, eventually } from "./testdata/fixtures.ts";

const PODS = "/api/v1/namespaces/default/pods";
let api: ApiServerHandle;
let k: Kubectl;
let dir: string;
let logs: Awaited<ReturnType<typeof startLogServer>>;

const pod = (name: string, containers: string[], nodeName?: string) => ({
  metadata: { name },
  spec: { ...(nodeName ? { nodeName } : {}), containers: containers.map((c) => ({ name: c, image: "busybox" })) },
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-podlogs-"));
  writeFileSync(join(dir, "one-main.log"), "line 1\nline 2\nline 3\n");
  writeFileSync(join(dir, "two-compute.log"), "compute says hi\n");
  writeFileSync(join(dir, "two-guest-console-log.log"), "[    0.000000] Linux version\nlogin: \n");
  const ca = await generateCa("kubelet-ca");
  const serving = await issueCertificate(ca, { commonName: "system:node:node01", ipAddresses: ["127.0.0.1"] });
  const client = await issueCertificate(ca, { commonName: "kube-apiserver-kubelet-client", usage: "client" });
  logs = await startLogServer((_ns, p, c) => (c === "gone" ? undefined : join(dir, `${p}-${c ?? ""}.log`)), {
    tls: { cert: serving.certPem, key: serving.keyPem, clientCa: ca.certPem },
  });
  api = await startApiServer({
    inMemory: true,
    kubeletClient: { certPem: client.certPem, keyPem: client.keyPem, caPem: ca.certPem },
  });
  k = kubectl(api.kubeconfigPath);
  expect((await call(api, "POST", "/api/v1/nodes", { metadata: { name: "node01" } })).code).toBe(201);
  const status = {
    status: {
      addresses: [{ type: "InternalIP", address: "127.0.0.1" }],
      daemonEndpoints: { kubeletEndpoint: { Port: logs.port } },
    },
  };
  expect((await call(api, "PATCH", "/api/v1/nodes/node01/status", status, "application/merge-patch+json")).code).toBe(
    200,
  );
  for (const p of [pod("one", ["main"], "node01"), pod("two", ["compute", "guest-console-log", "gone"], "node01")])
    expect((await call(api, "POST", PODS, p)).code).toBe(201);
  expect((await call(api, "POST", PODS, pod("pending", ["main"]))).code).toBe(201);
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await api?.stop();
  await logs?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("pods/log through the kubelet", () => {
  it("kubectl logs reads the only container, -c picks one, --tail and --limit-bytes cut", async () => {
    expect((await k.run(["logs", "one"])).stdout).toBe("line 1\nline 2\nline 3\n");
    expect((await k.run(["logs", "two", "-c", "guest-console-log"])).stdout).toBe(
      "[    0.000000] Linux version\nlogin: \n",
    );
    expect((await k.run(["logs", "one", "--tail=1"])).stdout).toBe("line 3\n");
    expect((await k.run(["logs", "one", "--limit-bytes=8"])).stdout).toBe("line 1\nl");
  });

  it("asks for a container name when there are several, and refuses unknown ones, as kube-apiserver does", async () => {
    const r = await call(api, "GET", `${PODS}/two/log`);
    expect(r.code).toBe(400);
    expect(r.body.message).toBe(
      "a container name must be specified for pod two, choose one of: [compute guest-console-log gone]",
    );
    const bad = await k.run(["logs", "two", "-c", "nope"]);
    expect(bad.stderr).toBe("error: container nope is not valid for pod two\n");
  });

  it("passes the kubelet's 404 on as kube-apiserver does, and answers an empty log for an unscheduled pod", async () => {
    const r = await call(api, "GET", `${PODS}/two/log?container=gone`);
    expect(r.code).toBe(404);
    expect(r.body.message).toBe("the server could not find the requested resource ( pods/log two)");
    const pending = await call(api, "GET", `${PODS}/pending/log`);
    expect(pending.code).toBe(200);
    expect(pending.text).toBe("");
    expect((await call(api, "GET", `${PODS}/nope/log`)).body.message).toBe('pods "nope" not found');
  });

  it("kubectl logs -f streams appended lines until the client goes away", async () => {
    const child = spawn("kubectl", ["logs", "-f", "two", "-c", "compute"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, KUBECONFIG: api.kubeconfigPath },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    try {
      await eventually("the first line", async () => (out.includes("compute says hi") ? true : undefined), 20_000);
      appendFileSync(join(dir, "two-compute.log"), "cloud-init: hello from the guest\n");
      await eventually("the appended line", async () => (out.includes("hello from the guest") ? true : undefined));
      expect(out).toBe("compute says hi\ncloud-init: hello from the guest\n");
    } finally {
      child.kill("SIGINT");
    }
    await new Promise((r) => child.once("exit", r));
  });
});
