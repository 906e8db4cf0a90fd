/**
 * `npm run bench -- virt-api`: what virt-api costs on the request path, with real sockets and the real local API
 * server (its own process): AdmissionReview round trips over HTTPS (validate and mutate the seed's vm-cirros), and
 * VM start/stop round trips through an aggregation proxy -> virt-api -> JSON patch on the API server. Prints a
 * table, then one JSON line.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import { request as httpsRequest } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { customResourceDefinitions } from "@kvt/api";
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { pino } from "pino";
import {
  AggregationProxy,
  generateCa,
  HttpHandlerClient,
  issueCertificate,
  RestClusterClient,
  startVirtApiServer,
  TemplateHandlerLocator,
  VirtApiApp,
  webhookRoutes,
} from "../src/lib.ts";

const root = new URL("../../../", import.meta.url).pathname;
const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const N = Number(process.env.BENCH_N ?? 200);
const dir = mkdtempSync(join(tmpdir(), "virt-api-bench-"));
let apiserver: ChildProcess | undefined;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

function ms(values: number[]): { p50: number; p95: number } {
  const s = [...values].sort((a, b) => a - b);
  return { p50: Math.round(quantile(s, 0.5) * 100) / 100, p95: Math.round(quantile(s, 0.95) * 100) / 100 };
}

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out");
}

async function main(): Promise<void> {
  const kubeconfig = join(dir, "kubeconfig");
  apiserver = spawn(
    process.execPath,
    [
      join(root, "tools/local-cluster/src/apiserver/main.ts"),
      "--data-dir",
      join(dir, "data"),
      "--kubeconfig",
      kubeconfig,
      "--log-level",
      "warn",
    ],
    { stdio: "ignore" },
  );
  await until(async () => existsSync(kubeconfig) && readFileSync(kubeconfig, "utf8").includes("server:"));
  const transport = new RestClient(kubeConfigFromFile(kubeconfig));
  for (const crd of customResourceDefinitions()) await transport.request({ method: "POST", path: CRDS, body: crd });
  const vms = "/apis/kubevirt.io/v1/namespaces/default/virtualmachines";
  await until(() =>
    transport.request({ method: "GET", path: vms }).then(
      () => true,
      () => false,
    ),
  );

  const ca = await generateCa();
  const serving = await issueCertificate(ca, { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] });
  const proxyCert = await issueCertificate(ca, { commonName: "front-proxy-client", usage: "client" });
  const app = new VirtApiApp({
    logger: pino({ level: "silent" }),
    clientFor: (user) => new RestClusterClient(transport, user),
    handler: new HttpHandlerClient(new TemplateHandlerLocator("node01=https://127.0.0.1:1")),
    webhooks: webhookRoutes(new RestClusterClient(transport), "kubevirt"),
    requestHeaderAuth: { allowedNames: [] },
    version: "0.1.0",
  });
  const virtApi = await startVirtApiServer(app, {
    certPem: serving.certPem,
    keyPem: serving.keyPem,
    clientCaPem: ca.certPem,
    host: "127.0.0.1",
    port: 0,
  });
  const proxy = new AggregationProxy({
    url: `https://127.0.0.1:${virtApi.port}`,
    caPem: ca.certPem,
    clientCertPem: proxyCert.certPem,
    clientKeyPem: proxyCert.keyPem,
  });
  const front: Server = createServer(
    (req, res) => void proxy.handle(req, res, { username: "bench", groups: ["system:masters"] }),
  );
  await new Promise<void>((r) => front.listen(0, "127.0.0.1", () => r()));
  const frontPort = (front.address() as AddressInfo).port;

  const vm = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name: "vm-cirros", namespace: "default" },
    spec: {
      runStrategy: "Halted",
      template: {
        spec: {
          domain: {
            devices: { disks: [{ name: "containerdisk", disk: { bus: "virtio" } }] },
            resources: { requests: { memory: "128Mi" } },
          },
          volumes: [{ name: "containerdisk", containerDisk: { image: "local/demo-linux:latest" } }],
        },
      },
    },
  };
  await transport.request({ method: "POST", path: vms, body: vm });

  const review = (path: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({
        apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        request: {
          uid: "u",
          kind: { group: "kubevirt.io", version: "v1", kind: "VirtualMachine" },
          resource: { group: "kubevirt.io", version: "v1", resource: "virtualmachines" },
          operation: "CREATE",
          namespace: "default",
          name: "vm-cirros",
          object: vm,
        },
      });
      const t = performance.now();
      const req = httpsRequest(
        {
          host: "127.0.0.1",
          port: virtApi.port,
          method: "POST",
          path,
          ca: ca.certPem,
          headers: { "content-type": "application/json" },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve(performance.now() - t));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  const put = (action: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const t = performance.now();
      const req = httpRequest(
        {
          host: "127.0.0.1",
          port: frontPort,
          method: "PUT",
          path: `/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm-cirros/${action}`,
          headers: { "content-type": "application/json" },
        },
        (res) => {
          res.resume();
          res.on("end", () =>
            res.statusCode === 202
              ? resolve(performance.now() - t)
              : reject(new Error(`${action}: HTTP ${res.statusCode ?? 0}`)),
          );
        },
      );
      req.on("error", reject);
      req.end("{}");
    });

  const validate: number[] = [];
  const mutate: number[] = [];
  const startStop: number[] = [];
  for (let i = 0; i < N; i++) validate.push(await review("/virtualmachines-validate"));
  for (let i = 0; i < N; i++) mutate.push(await review("/virtualmachines-mutate"));
  for (let i = 0; i < N / 2; i++) {
    startStop.push(await put("start"));
    startStop.push(await put("stop"));
  }
  front.close();
  await virtApi.close();

  const v = ms(validate);
  const m = ms(mutate);
  const s = ms(startStop);
  const rows: [string, string][] = [
    ["validating webhook round trip p50/p95 (ms)", `${v.p50} / ${v.p95}`],
    ["mutating webhook round trip p50/p95 (ms)", `${m.p50} / ${m.p95}`],
    ["start|stop via proxy -> virt-api -> API server p50/p95 (ms)", `${s.p50} / ${s.p95}`],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  process.stdout.write(`virt-api: ${N} requests each (HTTPS with keep-alive, sequential)\n`);
  for (const [k, val] of rows) process.stdout.write(`${k.padEnd(w)}  ${val}\n`);
  process.stdout.write(
    `${JSON.stringify({ area: "virt-api", requests: N, validateMs: v, mutateMs: m, startStopMs: s })}\n`,
  );
}

try {
  await main();
} finally {
  if (apiserver && apiserver.exitCode === null) {
    const exited = new Promise((r) => apiserver?.once("exit", r));
    apiserver.kill("SIGTERM");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
}
