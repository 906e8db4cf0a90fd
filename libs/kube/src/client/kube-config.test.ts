import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { kubeConfigFor, kubeConfigFromFile, loadKubeConfig } from "./kube-config.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvt-kubeconfig-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function kubeconfig(cluster: object, user: object, extra: object = {}): string {
  const path = join(dir, "config");
  writeFileSync(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "other", cluster: { server: "https://wrong:1" } },
        { name: "c", cluster },
      ],
      users: [{ name: "u", user }],
      contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
      "current-context": "ctx",
      ...extra,
    }),
  );
  return path;
}

async function applied(path: string): Promise<RequestOptions> {
  const opts: RequestOptions = {};
  await kubeConfigFromFile(path).applyToHTTPSOptions(opts);
  return opts;
}

describe("kubeconfig loading", () => {
  it("reads CA data, client certificate files relative to the kubeconfig, and a bearer token", async () => {
    writeFileSync(join(dir, "client.crt"), "CERT");
    writeFileSync(join(dir, "client.key"), "KEY");
    const path = kubeconfig(
      {
        server: "https://api:6443",
        "certificate-authority-data": Buffer.from("CA").toString("base64"),
        "tls-server-name": "kubernetes",
      },
      { "client-certificate": "client.crt", "client-key": "client.key", token: "t0k" },
    );
    expect(kubeConfigFromFile(path).getCurrentCluster()).toEqual({ server: "https://api:6443" });
    const opts = await applied(path);
    expect(opts.ca?.toString()).toBe("CA");
    expect(opts.cert?.toString()).toBe("CERT");
    expect((opts.key as Buffer).toString()).toBe("KEY");
    expect(opts.servername).toBe("kubernetes");
    expect(opts.rejectUnauthorized).toBeUndefined();
    expect(opts.headers).toEqual({ Authorization: "Bearer t0k" });
  });

  it("re-reads a token file at every application (a rotated token is used)", async () => {
    writeFileSync(join(dir, "token"), "first\n");
    const kc = kubeConfigFromFile(kubeconfig({ server: "https://api" }, { tokenFile: join(dir, "token") }));
    const a: RequestOptions = {};
    await kc.applyToHTTPSOptions(a);
    writeFileSync(join(dir, "token"), "second\n");
    const b: RequestOptions = {};
    await kc.applyToHTTPSOptions(b);
    expect([a.headers, b.headers]).toEqual([{ Authorization: "Bearer first" }, { Authorization: "Bearer second" }]);
  });

  it("skips TLS verification only when told, and sends basic auth", async () => {
    const opts = await applied(
      kubeconfig({ server: "https://api", "insecure-skip-tls-verify": true }, { username: "a", password: "b" }),
    );
    expect(opts.rejectUnauthorized).toBe(false);
    expect(opts.auth).toBe("a:b");
  });

  it("hands an exec plugin to client-node, which runs it", async () => {
    const cred = JSON.stringify({
      apiVersion: "client.authentication.k8s.io/v1",
      kind: "ExecCredential",
      status: { token: "from-exec" },
    });
    const path = kubeconfig(
      { server: "https://api" },
      {
        exec: {
          apiVersion: "client.authentication.k8s.io/v1",
          command: "sh",
          args: ["-c", `echo '${cred}'`],
          interactiveMode: "Never",
        },
      },
    );
    const opts = await applied(path);
    expect((opts.headers as Record<string, string>).Authorization).toBe("Bearer from-exec");
  });

  it("names what is wrong with a file that is not a usable kubeconfig", () => {
    writeFileSync(join(dir, "bad"), "- just\n- a list\n");
    expect(() => kubeConfigFromFile(join(dir, "bad"))).toThrow(/not a kubeconfig document/);
    expect(() => kubeConfigFromFile(kubeconfig({ server: "https://api" }, {}, { "current-context": "nope" }))).toThrow(
      /no context named "nope"/,
    );
    expect(() => kubeConfigFromFile(kubeconfig({}, {}))).toThrow(/cluster "c" has no server/);
    expect(() => loadKubeConfig({ env: { HOME: dir } })).toThrow(/Cannot find a kubeconfig/);
    expect(() => loadKubeConfig({ env: { HOME: dir, KUBECONFIG: join(dir, "missing") } })).toThrow(
      /Cannot find a kubeconfig/,
    );
  });

  it("finds the in-cluster service account (IPv6 service host bracketed) and the explicit file first", () => {
    const inCluster = loadKubeConfig({ env: { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" } });
    expect(inCluster.getCurrentCluster()?.server).toBe("https://[fd00::1]:443");
    const path = kubeconfig({ server: "https://from-file" }, {});
    const explicit = loadKubeConfig({ kubeconfig: path, env: { KUBERNETES_SERVICE_HOST: "10.0.0.1" } });
    expect(explicit.getCurrentCluster()?.server).toBe("https://from-file");
    expect(kubeConfigFor("http://127.0.0.1:1", "t").getCurrentCluster()?.server).toBe("http://127.0.0.1:1");
  });
});

/** Writes a kubeconfig `name` with the given entries; returns its path. */
function file(name: string, doc: object): string {
  const path = join(dir, name);
  writeFileSync(path, stringify({ apiVersion: "v1", kind: "Config", ...doc }));
  return path;
}

describe("kubeconfig loading as kubectl does it", () => {
  it("merges a $KUBECONFIG list, first file wins, missing files skipped; ~/.kube/config is then not read", async () => {
    const a = file("a", {
      "current-context": "first",
      contexts: [{ name: "first", context: { cluster: "shared", user: "alice", namespace: "ns-a" } }],
      users: [{ name: "alice", user: { token: "alice-a" } }],
    });
    const b = file("b", {
      "current-context": "second",
      contexts: [
        { name: "first", context: { cluster: "ignored", user: "ignored" } },
        { name: "second", context: { cluster: "shared", user: "bob" } },
      ],
      clusters: [{ name: "shared", cluster: { server: "https://from-b:6443", "certificate-authority": "ca.crt" } }],
      users: [
        { name: "alice", user: { token: "alice-b" } },
        { name: "bob", user: { token: "bob-b" } },
      ],
    });
    mkdirSync(join(dir, ".kube"));
    file(".kube/config", { "current-context": "home", contexts: [{ name: "home", context: { cluster: "x" } }] });
    writeFileSync(join(dir, "ca.crt"), "CA");
    const env = { HOME: dir, KUBECONFIG: [join(dir, "missing"), a, "", b].join(delimiter) };
    const kc = loadKubeConfig({ env });
    expect(kc).toMatchObject({ context: "first", namespace: "ns-a", files: [a, b] });
    expect(kc.getCurrentCluster()).toEqual({ server: "https://from-b:6443" });
    const opts: RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    expect(opts.headers).toEqual({ Authorization: "Bearer alice-a" });
    expect(opts.ca?.toString()).toBe("CA"); // relative to b, the file that named it
    const other = loadKubeConfig({ env, context: "second" });
    expect(other).toMatchObject({ context: "second", namespace: undefined });
    const bob: RequestOptions = {};
    await other.applyToHTTPSOptions(bob);
    expect(bob.headers).toEqual({ Authorization: "Bearer bob-b" });
    expect(() => loadKubeConfig({ env, context: "nope" })).toThrow(/no context named "nope"/);
  });

  it("--server replaces the address and keeps the CA and credentials; alone it needs no kubeconfig", async () => {
    const path = kubeconfig({ server: "https://api", "certificate-authority-data": "Q0E=" }, { token: "t" });
    const kc = loadKubeConfig({ kubeconfig: path, server: "https://elsewhere:6443" });
    expect(kc.getCurrentCluster()).toEqual({ server: "https://elsewhere:6443" });
    const opts: RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    expect([opts.ca?.toString(), opts.headers]).toEqual(["CA", { Authorization: "Bearer t" }]);
    const bare = loadKubeConfig({ env: { HOME: dir }, server: "http://127.0.0.1:8080" });
    expect(bare).toMatchObject({ files: [], context: undefined, namespace: undefined });
    expect(bare.getCurrentCluster()).toEqual({ server: "http://127.0.0.1:8080" });
  });

  it("runs an exec plugin of a merged context other than the current one", async () => {
    const cred = JSON.stringify({
      apiVersion: "client.authentication.k8s.io/v1",
      kind: "ExecCredential",
      status: { token: "exec-token" },
    });
    const a = file("a", { "current-context": "x", contexts: [{ name: "x", context: { cluster: "c" } }] });
    const b = file("b", {
      clusters: [{ name: "c", cluster: { server: "https://api" } }],
      contexts: [{ name: "plugin", context: { cluster: "c", user: "e" } }],
      users: [
        {
          name: "e",
          user: {
            exec: { apiVersion: "client.authentication.k8s.io/v1", command: "sh", args: ["-c", `echo '${cred}'`] },
          },
        },
      ],
    });
    const kc = loadKubeConfig({ env: { KUBECONFIG: `${a}${delimiter}${b}` }, context: "plugin" });
    const opts: RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    expect((opts.headers as Record<string, string>).Authorization).toBe("Bearer exec-token");
  });
});
