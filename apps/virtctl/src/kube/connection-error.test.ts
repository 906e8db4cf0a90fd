import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runVirtctl } from "../cli/cli.ts";
import { COMMANDS } from "../commands/index.ts";
import { classifyConnectionError, failureLine } from "./connection-error.ts";

let dir = "";
const servers: Server[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "virtctl-conn-"));
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  rmSync(dir, { recursive: true, force: true });
});

/** Writes a kubeconfig whose context `ctx-test` points at `server`; returns its path. */
function kubeconfig(name: string, server: string, user: Record<string, string> = { token: "t0ken" }): string {
  const file = join(dir, name);
  const userYaml = Object.entries(user)
    .map(([k, v]) => `    ${k}: ${v}`)
    .join("\n");
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
current-context: ctx-test
clusters:
- name: c
  cluster:
    server: ${server}
contexts:
- name: ctx-test
  context: {cluster: c, user: u, namespace: ns1}
users:
- name: u
  user:
${userYaml}
`,
  );
  return file;
}

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as AddressInfo).port;
}

/** Runs virtctl in-process; resolves to its exit code and output. */
async function virtctl(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runVirtctl(args, COMMANDS, {
    stdin: process.stdin,
    stdout: {
      write: (s: string): boolean => {
        stdout += s;
        return true;
      },
    },
    stderr: {
      write: (s: string): boolean => {
        stderr += s;
        return true;
      },
    },
    env: { HOME: dir },
    signal: new AbortController().signal,
  });
  return { code, stdout, stderr };
}

/** One line, naming the server, the kubeconfig file and the context, and no stack. */
function expectOneLine(stderr: string, server: string, file: string): void {
  expect(stderr.split("\n").filter((l) => l !== "")).toHaveLength(1);
  expect(stderr).toContain(server);
  expect(stderr).toContain(`kubeconfig ${file}`);
  expect(stderr).toContain('context "ctx-test"');
  expect(stderr).not.toMatch(/\n\s+at /);
}

async function closedPort(): Promise<number> {
  const server = createHttpServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

function answering(code: number, message: string): Server {
  return createHttpServer((_req, res) => {
    res.writeHead(code, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ kind: "Status", status: "Failure", code, message }));
  });
}

describe("connection failures say what to check", () => {
  it("a refused connection names the server, kubeconfig and context and asks whether the cluster is up", async () => {
    const server = `http://127.0.0.1:${await closedPort()}`;
    const file = kubeconfig("refused", server);
    const out = await virtctl(["start", "vm1", "--kubeconfig", file]);
    expect(out.code).toBe(1);
    expectOneLine(out.stderr, server, file);
    expect(out.stderr).toContain("was refused");
    expect(out.stderr).toContain("is the cluster up");
    expect(out.stderr).toContain("KUBECONFIG");
  });

  it("version reports the refused connection the same way after the client version", async () => {
    const server = `http://127.0.0.1:${await closedPort()}`;
    const file = kubeconfig("refused-version", server);
    const out = await virtctl(["version", "--kubeconfig", file]);
    expect(out.code).toBe(1);
    expect(out.stdout).toContain("Client Version:");
    expectOneLine(out.stderr, server, file);
  });

  it("a DNS failure names the host to check", async () => {
    const server = "https://no-such-host.invalid:6443";
    const file = kubeconfig("dns", server);
    const out = await virtctl(["stop", "vm1", "--kubeconfig", file]);
    expect(out.code).toBe(1);
    expectOneLine(out.stderr, server, file);
    expect(out.stderr).toContain('cannot resolve the API server\'s host "no-such-host.invalid"');
  });

  it("an untrusted server certificate points at the kubeconfig's CA", async () => {
    const key = join(dir, "tls.key");
    const crt = join(dir, "tls.crt");
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", key],
      { stdio: ["ignore", "pipe", "ignore"], encoding: "utf8" },
    );
    const pem = execFileSync(
      "openssl",
      ["req", "-x509", "-key", key, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
      { encoding: "utf8" },
    );
    writeFileSync(crt, pem);
    const port = await listen(createHttpsServer({ key: readFileSync(key), cert: pem }, (_q, r) => r.end("{}")));
    const server = `https://127.0.0.1:${port}`;
    const file = kubeconfig("tls", server);
    const out = await virtctl(["pause", "vmi", "vm1", "--kubeconfig", file]);
    expect(out.code).toBe(1);
    expectOneLine(out.stderr, server, file);
    expect(out.stderr).toContain("the TLS handshake with the API server");
    expect(out.stderr).toContain("self-signed certificate");
    expect(out.stderr).toContain("certificate-authority");
  });

  it("https to a plain-HTTP port is a TLS failure too", async () => {
    const port = await listen(createHttpServer((_q, r) => r.end("{}")));
    const server = `https://127.0.0.1:${port}`;
    const file = kubeconfig("tls-plain", server);
    const out = await virtctl(["migrate", "vm1", "--kubeconfig", file]);
    expect(out.code).toBe(1);
    expectOneLine(out.stderr, server, file);
    expect(out.stderr).toContain("the TLS handshake with the API server");
    expect(out.stderr).toContain("wrong version number");
  });

  it("401 says the credentials were not accepted", async () => {
    const server = `http://127.0.0.1:${await listen(answering(401, "Unauthorized"))}`;
    const file = kubeconfig("401", server);
    const out = await virtctl(["restart", "vm1", "--kubeconfig", file]);
    expect(out.code).toBe(1);
    expectOneLine(out.stderr, server, file);
    expect(out.stderr).toMatch(
      /^error restarting VirtualMachine: Unauthorized: the API server did not accept the credentials/,
    );
  });

  it("403 keeps the server's reason and says how to find out what the user may do", async () => {
    const message = 'virtualmachines.subresources.kubevirt.io "vm1" is forbidden: User "bob" cannot update resource';
    const server = `http://127.0.0.1:${await listen(answering(403, message))}`;
    const file = kubeconfig("403", server);
    const out = await virtctl(["soft-reboot", "vm1", "--kubeconfig", file]);
    expect(out.code).toBe(1);
    expectOneLine(out.stderr, server, file);
    expect(out.stderr).toContain(message);
    expect(out.stderr).toContain("kubectl auth can-i --list");
  });

  it("classifies Node's error codes, including happy-eyeballs AggregateErrors", () => {
    const withCode = (code: string): Error => Object.assign(new Error(code), { code });
    expect(classifyConnectionError(withCode("ECONNREFUSED"))).toBe("refused");
    expect(classifyConnectionError(new AggregateError([withCode("ECONNREFUSED")], ""))).toBe("refused");
    expect(classifyConnectionError(withCode("EAI_AGAIN"))).toBe("dns");
    expect(classifyConnectionError(withCode("UNABLE_TO_VERIFY_LEAF_SIGNATURE"))).toBe("tls");
    expect(classifyConnectionError(withCode("ERR_TLS_CERT_ALTNAME_INVALID"))).toBe("tls");
    expect(classifyConnectionError(withCode("ETIMEDOUT"))).toBe("timeout");
    expect(classifyConnectionError(withCode("EHOSTUNREACH"))).toBe("unreachable");
    expect(classifyConnectionError(new Error("other"))).toBeUndefined();
    expect(failureLine(new Error("plain"))).toBe("plain");
  });
});
