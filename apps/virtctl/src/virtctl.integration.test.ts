/**
 * virtctl as a user runs it (a subprocess with a kubeconfig) against a real HTTP server that answers the paths an
 * API server serves for KubeVirt: it records requests and their Authorization header, and serves the console
 * WebSocket with the plain.kubevirt.io subprotocol.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";

const mainPath = new URL("./main.ts", import.meta.url).pathname;
const SUB = "/apis/subresources.kubevirt.io/v1/namespaces";

interface Seen {
  method: string;
  url: string;
  auth: string | undefined;
  body: string;
}

function statusBody(code: number, reason: string, message: string): string {
  return JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code });
}

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function virtctl(
  args: string[],
  env: Record<string, string>,
  stdin?: (write: (s: string) => void, output: () => string) => Promise<void>,
): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [mainPath, ...args], { env: { PATH: process.env.PATH ?? "", ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    if (stdin)
      stdin(
        (s) => child.stdin.write(s),
        () => stdout,
      ).catch(reject);
    else child.stdin.end();
  });
}

describe("virtctl against an HTTP API server", { timeout: 60_000 }, () => {
  const seen: Seen[] = [];
  let server: Server;
  let wss: WebSocketServer;
  let dir: string;
  let kubeconfig: string;

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString();
        seen.push({ method: req.method ?? "", url: req.url ?? "", auth: req.headers.authorization, body });
        const url = req.url ?? "";
        if (req.method === "PUT" && url === `${SUB}/default/virtualmachines/vm-cirros/start`) {
          res.writeHead(409, { "Content-Type": "application/json" });
          res.end(
            statusBody(
              409,
              "Conflict",
              'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-cirros": VM is already running',
            ),
          );
        } else if (req.method === "PUT" && url.startsWith(SUB)) {
          res.writeHead(202);
          res.end();
        } else if (url === "/apis/subresources.kubevirt.io/v1/version") {
          res.writeHead(200, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ gitVersion: "v0.1.0", gitTreeState: "clean", platform: "linux/amd64" }));
        } else {
          res.writeHead(404, { "Content-Type": "application/json" });
          res.end(statusBody(404, "NotFound", "the server could not find the requested resource"));
        }
      });
    });
    wss = new WebSocketServer({
      noServer: true,
      handleProtocols: (p) => (p.has("plain.kubevirt.io") ? "plain.kubevirt.io" : false),
    });
    server.on("upgrade", (req, socket, head) => {
      seen.push({ method: "UPGRADE", url: req.url ?? "", auth: req.headers.authorization, body: "" });
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.send(Buffer.from("cloud-init: hello from the guest\r\n"));
        if ((req.url ?? "").includes("/vm-poweroff/")) {
          ws.close(1000, "guest powered off");
          return;
        }
        ws.on("message", (data: Buffer) => ws.send(Buffer.from(`echo:${data.toString()}`)));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as AddressInfo).port;
    dir = mkdtempSync(join(tmpdir(), "virtctl-it-"));
    kubeconfig = join(dir, "config");
    writeFileSync(
      kubeconfig,
      [
        "apiVersion: v1",
        "kind: Config",
        "current-context: local",
        "clusters:",
        `- name: local\n  cluster:\n    server: http://127.0.0.1:${port}\n    insecure-skip-tls-verify: true`,
        "users:",
        "- name: alice\n  user:\n    token: alice-token",
        "- name: bob\n  user:\n    token: bob-token",
        "contexts:",
        "- name: local\n  context:\n    cluster: local\n    user: alice",
        "- name: other\n  context:\n    cluster: local\n    user: bob\n    namespace: prod",
      ].join("\n"),
    );
  });

  afterAll(async () => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("virtctl stop uses $KUBECONFIG, the context's user token and namespace default", async () => {
    const r = await virtctl(["stop", "vm1"], { KUBECONFIG: kubeconfig, HOME: dir });
    expect(r).toMatchObject({ code: 0, stdout: "VM vm1 was scheduled to stop\n" });
    expect(seen.at(-1)).toMatchObject({
      method: "PUT",
      url: `${SUB}/default/virtualmachines/vm1/stop`,
      auth: "Bearer alice-token",
      body: "{}",
    });
  });

  it("a $KUBECONFIG list skips missing files and merges the rest, first wins; -s replaces the address", async () => {
    const first = join(dir, "first");
    writeFileSync(first, "apiVersion: v1\nkind: Config\ncurrent-context: other\n");
    const list = [join(dir, "missing"), first, kubeconfig].join(":");
    await virtctl(["stop", "vm1"], { KUBECONFIG: list, HOME: dir });
    expect(seen.at(-1)).toMatchObject({ url: `${SUB}/prod/virtualmachines/vm1/stop`, auth: "Bearer bob-token" });
    const r = await virtctl(["-s", "http://127.0.0.1:1", "stop", "vm1"], { KUBECONFIG: list, HOME: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("the connection to the API server at http://127.0.0.1:1 was refused");
    expect(r.stderr).toContain(`kubeconfig ${first}:${kubeconfig}, context "other"`);
  });

  it("--kubeconfig and --context pick another user and namespace; -n overrides the namespace", async () => {
    await virtctl(["--kubeconfig", kubeconfig, "--context", "other", "restart", "vm1"], { HOME: dir });
    expect(seen.at(-1)).toMatchObject({ url: `${SUB}/prod/virtualmachines/vm1/restart`, auth: "Bearer bob-token" });
    await virtctl(["migrate", "vm1", "-n", "dev", "--context=other", "--kubeconfig", kubeconfig], { HOME: dir });
    expect(seen.at(-1)).toMatchObject({ url: `${SUB}/dev/virtualmachines/vm1/migrate` });
  });

  it("a conflict prints KubeVirt's message and exits 1", async () => {
    const r = await virtctl(["start", "vm-cirros"], { KUBECONFIG: kubeconfig, HOME: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'Error starting VirtualMachine Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-cirros": VM is already running\n',
    );
  });

  it("version asks the aggregated version endpoint", async () => {
    const r = await virtctl(["version"], { KUBECONFIG: kubeconfig, HOME: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Server Version: version.Info{GitVersion:"v0.1.0"');
  });

  it("without any kubeconfig, commands fail with a hint (exit 1) and version still prints the client", async () => {
    const r = await virtctl(["start", "vm1"], { HOME: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Cannot find a kubeconfig: pass --kubeconfig FILE, set KUBECONFIG");
    const v = await virtctl(["version"], { HOME: dir });
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^Client Version: /);
  });

  it("console streams the guest's output and leaves on Ctrl+] when piped", async () => {
    const r = await virtctl(["console", "vm-cirros"], { KUBECONFIG: kubeconfig, HOME: dir }, async (write, output) => {
      for (let i = 0; i < 500 && !output().includes("hello from the guest"); i++)
        await new Promise((res) => setTimeout(res, 10));
      write("ls\n");
      for (let i = 0; i < 500 && !output().includes("echo:ls"); i++) await new Promise((res) => setTimeout(res, 10));
      write("\x1d");
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("cloud-init: hello from the guest");
    expect(r.stdout).toContain("echo:ls\n");
    expect(r.stderr).toContain("Successfully connected to vm-cirros console. Press Ctrl+] or Ctrl+5 to exit console.");
    expect(seen.find((s) => s.method === "UPGRADE")).toMatchObject({
      url: `${SUB}/default/virtualmachineinstances/vm-cirros/console`,
      auth: "Bearer alice-token",
    });
  });

  it("console with piped stdin that ends at once still prints the guest's output until the console closes", async () => {
    const r = await virtctl(["console", "vm-poweroff"], { KUBECONFIG: kubeconfig, HOME: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("cloud-init: hello from the guest\r\n");
  });

  it("console of a VMI the server refuses prints KubeVirt's error and exits 1", async () => {
    const r = await virtctl(["--server", "http://127.0.0.1:1", "console", "x"], { HOME: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ECONNREFUSED|connect/);
  });
});
