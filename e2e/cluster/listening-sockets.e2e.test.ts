/**
 * Nothing of the cluster listens without authenticating its peer (issue 23). With a VM running, every listening
 * socket of every process of the cluster (e2e/lib/listening-sockets.ts: /proc, not a list of known ports) is
 * classified by its owner and port and probed as an attacker on this host would:
 *
 *   API server            TLS only; no credentials -> system:anonymous, 403 from RBAC; a stranger's certificate -> 401
 *   virt-api              TLS only; a subresource without the front proxy's client certificate -> 401 (its
 *                         admission webhooks answer any TLS client, as KubeVirt's: they only compute a verdict)
 *   virt-handler server   mutual TLS: plain HTTP, TLS without a certificate, a certificate of another CA, and the
 *                         KubeVirt CA's certificate for another name are all refused before any request is read
 *   process-kubelet logs  mutual TLS as a kubelet's --client-ca-file: the same refusals
 *   metrics / health      plain HTTP on purpose (read-only, no guest data: see each metrics server's comment):
 *                         loopback only, writes refused, the guest's console text absent
 *   unix (launchers ...)  the socket 0600 (or stricter) and its directory 0700, owned by the component's user;
 *                         an unprivileged user cannot connect (checked against a control socket it can reach)
 *
 * Every TCP socket is bound to loopback (the local cluster's nodes share this host). A socket that fits no class
 * fails the test: a new door must come with its policy here. The two findings get their own regression tests:
 * pause and console on the handler's port, container logs on a kubelet's port, without credentials.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/certs";
import { runsComponent } from "@kvt/local-cluster";
import { eventually } from "@kvt/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import WebSocket from "ws";
import { getJson, kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { type ListeningSocket, listeningSockets } from "../lib/listening-sockets.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-sockets";
const kubeconfig = inject("kubeconfig");
const dataDir = dirname(kubeconfig);
const pki = join(dataDir, "pki");
const read = (f: string): string => readFileSync(join(pki, f), "utf8");
/** KubeVirt's certificates, as the components read them (virt-controller's Secrets, written as volumes). */
const volume = (kind: "secret", name: string, key: string): string =>
  readFileSync(join(dataDir, "volumes", kind, name, key), "utf8");
/** The KubeVirt CA bundle, as the components watch it: ConfigMap kubevirt/kubevirt-ca. */
const kubevirtCaBundle = async (): Promise<string> =>
  (await getJson<{ data: Record<string, string> }>(kubeconfig, "configmap", "kubevirt-ca", "kubevirt")).data[
    "ca-bundle"
  ] ?? "";

interface ClusterState {
  apiPort: number;
  virtApiPort: number;
  handlerPorts: Record<string, number>;
  metricsPorts: Record<string, number>;
}

/** What a probe saw: an HTTP status, or a refusal (the connection or handshake failed, or no HTTP answer). */
type Outcome = number | `refused: ${string}`;

interface TlsOptions {
  ca?: string;
  cert?: string;
  key?: string;
  /** Skip the server check (the prober attacks the server; it need not trust it). */
  rejectUnauthorized?: boolean;
}

function probe(port: number, path: string, method: string, tls: TlsOptions | "plain"): Promise<Outcome> {
  return new Promise((resolve) => {
    const base = { host: "127.0.0.1", port, path, method, timeout: 5000, agent: false as const };
    const done = (res: { statusCode?: number; resume(): void }): void => {
      res.resume();
      resolve(res.statusCode ?? 0);
    };
    const req =
      tls === "plain" ? httpRequest(base, done) : httpsRequest({ ...base, rejectUnauthorized: false, ...tls }, done);
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (e) => resolve(`refused: ${e.message}`));
    req.end(method === "PUT" ? "{}" : undefined);
  });
}

const refused = (o: Outcome): boolean => typeof o === "string";

/** Connects to `path` as user nobody; "connected" or the error. */
function connectAsNobody(path: string): string {
  const script = `require("node:net").connect(${JSON.stringify(path)}).on("connect",()=>{console.log("connected");process.exit(0)}).on("error",(e)=>{console.log(e.code);process.exit(0)})`;
  const r = spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", script], {
    encoding: "utf8",
    timeout: 10_000,
  });
  return `${r.stdout}${r.stderr}`.trim();
}

describe("every listening socket of the cluster authenticates its peer", () => {
  let state: ClusterState;
  let sockets: ListeningSocket[];
  let vmiNode: string;
  let launcherPod: string;
  let strangerCa: CertificateAndKey;
  let strangerClient: CertificateAndKey;
  let kubeletPorts: Record<string, number>;

  beforeAll(async () => {
    state = JSON.parse(readFileSync(join(dataDir, "cluster.json"), "utf8")) as ClusterState;
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME, { running: true })));
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        return v!;
      },
      { ...CLUSTER_WAIT, what: "the VMI to run" },
    );
    vmiNode = vmi.status!.nodeName!;
    launcherPod = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1)!.metadata.name;
    const nodes = await getJson<{
      items: { metadata: { name: string }; status: { daemonEndpoints: { kubeletEndpoint: { Port: number } } } }[];
    }>(kubeconfig, "nodes");
    kubeletPorts = Object.fromEntries(
      nodes.items.map((n) => [n.metadata.name, n.status.daemonEndpoints.kubeletEndpoint.Port]),
    );
    // Another CA issuing a certificate with the very names the servers accept.
    strangerCa = await generateCa("kubevirt-ca");
    strangerClient = await issueCertificate(strangerCa, {
      commonName: "kubevirt.io:system:client:virt-handler",
      usage: "client",
    });
    sockets = listeningSockets(dataDir);
  }, 120_000);

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  const tcp = (): Extract<ListeningSocket, { kind: "tcp" }>[] =>
    sockets.filter((s): s is Extract<ListeningSocket, { kind: "tcp" }> => s.kind === "tcp");
  const runs = (s: ListeningSocket, entry: string): boolean => runsComponent(s.process.argv, entry);

  /** The class of a TCP socket, from its process and port. */
  function classify(s: Extract<ListeningSocket, { kind: "tcp" }>): string {
    if (runs(s, "tools/local-cluster/src/apiserver/main.ts") && s.port === state.apiPort) return "apiserver";
    if (runs(s, "apps/virt-api/src/main.ts") && s.port === state.virtApiPort) return "virt-api";
    if (runs(s, "apps/virt-handler/src/main.ts") && Object.values(state.handlerPorts).includes(s.port))
      return "handler";
    if (runs(s, "tools/local-cluster/src/kubelet/main.ts") && Object.values(kubeletPorts).includes(s.port))
      return "kubelet";
    if (Object.values(state.metricsPorts).includes(s.port)) return "metrics";
    return "unknown";
  }

  it("finds the sockets of every component, all on loopback, each of a known class", () => {
    const classes = tcp().map((s) => `${classify(s)} ${s.address}:${s.port} ${s.process.argv.slice(1, 2).join(" ")}`);
    expect(classes.filter((c) => c.startsWith("unknown"))).toEqual([]);
    const count = (c: string): number => classes.filter((x) => x.startsWith(`${c} `)).length;
    expect(count("apiserver")).toBe(1);
    expect(count("virt-api")).toBe(1);
    expect(count("handler")).toBe(inject("nodeNames").length);
    expect(count("kubelet")).toBe(inject("nodeNames").length);
    expect(count("metrics")).toBeGreaterThanOrEqual(3);
    for (const s of tcp()) expect(["127.0.0.1", "0:0:0:0:0:0:0:1"], `${s.address}:${s.port}`).toContain(s.address);
    expect(sockets.some((s) => s.kind === "unix" && s.path.includes("/sockets/launcher-"))).toBe(true);
  });

  it("refuses plain HTTP on every TLS port", async () => {
    for (const s of tcp().filter((x) => classify(x) !== "metrics")) {
      expect(refused(await probe(s.port, "/healthz", "GET", "plain")), `${classify(s)} :${s.port}`).toBe(true);
    }
  });

  it("API server: no credentials get 403 (system:anonymous), a stranger's certificate 401", async () => {
    const path = "/api/v1/namespaces/kube-system/secrets";
    expect(await probe(state.apiPort, path, "GET", {})).toBe(403);
    expect(await probe(state.apiPort, path, "GET", { cert: strangerClient.certPem, key: strangerClient.keyPem })).toBe(
      401,
    );
  });

  it("virt-api: subresources without the front proxy's certificate get 401", async () => {
    const path = `/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/${NAME}/pause`;
    expect(await probe(state.virtApiPort, path, "PUT", {})).toBe(401);
    const stranger = { cert: strangerClient.certPem, key: strangerClient.keyPem };
    expect(await probe(state.virtApiPort, path, "PUT", stranger)).toBe(401);
  });

  it("virt-handler and kubelet ports: mutual TLS refuses no certificate, another CA, and another name", async () => {
    const mtls = tcp().filter((s) => ["handler", "kubelet"].includes(classify(s)));
    const kubevirtCa = await kubevirtCaBundle();
    const kubeletCa = read("kubelet-ca.crt");
    // The KubeVirt CA's certificate for virt-api's own serving name is not virt-api's client certificate.
    const wrongName = {
      cert: volume("secret", "kubevirt-virt-api-certs", "tls.crt"),
      key: volume("secret", "kubevirt-virt-api-certs", "tls.key"),
    };
    for (const s of mtls) {
      const what = `${classify(s)} :${s.port}`;
      const ca = classify(s) === "handler" ? kubevirtCa : kubeletCa;
      const good =
        classify(s) === "handler"
          ? {
              cert: volume("secret", "kubevirt-virt-handler-certs", "tls.crt"),
              key: volume("secret", "kubevirt-virt-handler-certs", "tls.key"),
            }
          : { cert: read("apiserver-kubelet-client.crt"), key: read("apiserver-kubelet-client.key") };
      const path = classify(s) === "handler" ? "/healthz" : `/containerLogs/default/${launcherPod}/compute`;
      expect(refused(await probe(s.port, path, "GET", { ca })), `${what} without a certificate`).toBe(true);
      const stranger = { ca, cert: strangerClient.certPem, key: strangerClient.keyPem };
      expect(refused(await probe(s.port, path, "GET", stranger)), `${what} with another CA's`).toBe(true);
      if (classify(s) === "handler")
        expect(refused(await probe(s.port, path, "GET", { ca, ...wrongName })), `${what} another name`).toBe(true);
      // The control: the one client each serves gets an HTTP answer (a 404 from the kubelet of the other node), so
      // the refusals above are the policy, not a dead port.
      expect(typeof (await probe(s.port, path, "GET", { ca, ...good })), `${what} with its client's`).toBe("number");
    }
  });

  it("metrics and health ports: loopback, read-only, no guest data", async () => {
    for (const s of tcp().filter((x) => classify(x) === "metrics")) {
      expect(s.address).toBe("127.0.0.1");
      const write = await probe(s.port, "/metrics", "POST", "plain");
      expect(typeof write === "number" && write < 300, `POST :${s.port} answered ${String(write)}`).toBe(false);
      const text = await new Promise<string>((resolve) => {
        httpRequest({ host: "127.0.0.1", port: s.port, path: "/metrics" }, (res) => {
          let body = "";
          res.on("data", (d: Buffer) => {
            body += d.toString();
          });
          res.on("end", () => resolve(body));
        })
          .on("error", () => resolve(""))
          .end();
      });
      expect(text).not.toMatch(/kvt-guest progress/);
    }
  });

  it("unix sockets: 0600 or stricter in 0700 directories, refused to an unprivileged user", async () => {
    const unix = sockets.filter((s): s is Extract<ListeningSocket, { kind: "unix" }> => s.kind === "unix");
    expect(unix.length).toBeGreaterThan(0);
    for (const s of unix) {
      const st = statSync(s.path);
      const uid = statSync(`/proc/${s.process.pid}`).uid;
      expect(st.uid, s.path).toBe(uid);
      expect((st.mode & 0o077).toString(8), `${s.path} mode ${(st.mode & 0o777).toString(8)}`).toBe("0");
      expect((statSync(dirname(s.path)).mode & 0o077).toString(8), `${dirname(s.path)}`).toBe("0");
    }
    if (process.getuid?.() !== 0 || !existsSync("/usr/bin/setpriv")) return;
    // The control: a socket nobody may reach is reached, so a refusal below is the modes' doing.
    const dir = mkdtempSync(join(tmpdir(), "kvt-sock-control-"));
    chmodSync(dir, 0o755);
    const control = join(dir, "open.sock");
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(control, resolve));
    try {
      chmodSync(control, 0o777);
      expect(connectAsNobody(control)).toBe("connected");
      for (const s of unix) expect(connectAsNobody(s.path), s.path).toMatch(/^EACCES$/);
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // Regression, issue 23 "Unauthenticated control of VMs": anyone reaching a handler's port paused a VMI (200)
  // and opened its serial console (101, guest bytes) over plain HTTP.
  it("virt-handler's port: pause and console without credentials are refused; the VMI stays unpaused", async () => {
    const port = state.handlerPorts[vmiNode];
    const path = `/v1/namespaces/default/virtualmachineinstances/${NAME}`;
    expect(refused(await probe(port, `${path}/pause`, "PUT", "plain"))).toBe(true);
    expect(refused(await probe(port, `${path}/pause`, "PUT", { ca: await kubevirtCaBundle() }))).toBe(true);
    for (const url of [`ws://127.0.0.1:${port}${path}/console`, `wss://127.0.0.1:${port}${path}/console`]) {
      const outcome = await new Promise<string>((resolve) => {
        const ws = new WebSocket(url, ["plain.kubevirt.io"], { rejectUnauthorized: false, handshakeTimeout: 5000 });
        ws.on("open", () => {
          ws.close();
          resolve("open");
        });
        ws.on("error", (e) => resolve(`refused: ${e.message}`));
      });
      expect(outcome, url).toMatch(/^refused/);
    }
    const vmi = await vmiOrUndefined(kubeconfig, NAME);
    expect(vmi?.status?.conditions?.some((c) => c.type === "Paused")).toBe(false);
  });

  // Regression, issue 23: a kubelet's log port served container logs (the guest console stream) to anyone.
  it("a kubelet's port: container logs without a certificate are refused; kubectl logs still works", async () => {
    const port = kubeletPorts[vmiNode];
    const path = `/containerLogs/default/${launcherPod}/compute`;
    expect(refused(await probe(port, path, "GET", "plain"))).toBe(true);
    expect(refused(await probe(port, path, "GET", { ca: read("kubelet-ca.crt") }))).toBe(true);
    const logs = await kubectlOk(kubeconfig, ["logs", launcherPod, "-c", "compute", "--tail=5"]);
    expect(logs.length).toBeGreaterThan(0);
  });

  it("control: virt-api still pauses and unpauses through the handler with its certificate", async () => {
    expect((await virtctl(kubeconfig, ["pause", "vmi", NAME])).code).toBe(0);
    await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.conditions?.some((c) => c.type === "Paused")).toBe(true);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the VMI to pause" },
    );
    expect((await virtctl(kubeconfig, ["unpause", "vmi", NAME])).code).toBe(0);
  });
});
