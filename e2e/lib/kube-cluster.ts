/**
 * The e2e run on a real Kubernetes (KVT_E2E_CLUSTER=kube): tools/kube's kube-apiserver, etcd, controller manager,
 * scheduler and real kubelets with containerd, the release installed as a user installs it (deploy/README.md):
 *
 * ```
 *   npm run kube -- up --nodes 2 --cluster-dir <dir>         -> kubeconfig, the registry's address
 *   npm run images -- push --registry <r> --cert-dir <pki>    the five release images (built when stale)
 *   kubectl create namespace kubevirt; configmap kubevirt-requestheader-ca   (deploy/README.md's one manual step)
 *   kubectl apply -k deploy/; wait for the KubeVirt CRD; apply the KubeVirt CR (useEmulation: nodes lack KVM;
 *     masquerade by default, as the local cluster's CR)
 *   kubectl wait kubevirt/kubevirt --for=condition=Available
 *   ...tests...
 *   npm run kube -- down --cluster-dir <dir>                  (KVT_E2E_KEEP=1 leaves it running)
 * ```
 * KVT_E2E_KUBE_DIR picks the cluster directory (default .data/kube/e2e; a cluster running there is stopped and the
 * directory removed first, so every run starts empty; KVT_E2E_KUBE_REUSE=1 instead runs the tests on the cluster a
 * KVT_E2E_KEEP=1 run left there, as it is). Each step's time goes to stdout, prefixed
 * `[e2e kube]`.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { kubectl, kubectlOk } from "./cli.ts";

const root = new URL("../../", import.meta.url).pathname;

/** What the global setup hands the tests from the real cluster. */
export interface KubeE2eCluster {
  readonly kubeconfig: string;
  readonly nodeNames: readonly string[];
  readonly stop: () => Promise<void>;
}

const log = (line: string): void => void process.stdout.write(`[e2e kube] ${line}\n`);

/** Runs `npm run -s <args>` in the checkout; rejects with its stderr's tail when it fails. */
function npmRun(args: readonly string[], timeoutMs: number): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("npm", ["run", "-s", ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve({ stdout, stderr });
      else {
        const tail = `${stdout}\n${stderr}`.trim().split("\n").slice(-20).join("\n");
        reject(new Error(`npm run ${args.join(" ")} exited ${code}:\n${tail}`));
      }
    });
  });
}

async function timed<T>(what: string, step: () => Promise<T>): Promise<T> {
  const start = performance.now();
  const result = await step();
  log(`${what}: ${((performance.now() - start) / 1000).toFixed(1)} s`);
  return result;
}

/**
 * The KubeVirt CR of deploy/kubevirt-cr configured as the local cluster configures its own (local-cluster.ts):
 * `developerConfiguration.useEmulation` on (no usable KVM on the nodes) and `network.defaultNetworkInterface:
 * masquerade` (KubeVirt's default is bridge, which does not live-migrate; the e2e files migrate VMs that name no
 * interface).
 */
export function emulatedKubeVirtCr(yamlText: string): Record<string, unknown> {
  type Configuration = { developerConfiguration?: Record<string, unknown>; network?: Record<string, unknown> };
  const cr = parse(yamlText) as { spec?: { configuration?: Configuration } };
  cr.spec = cr.spec ?? {};
  const spec = cr.spec;
  spec.configuration = spec.configuration ?? {};
  const configuration = spec.configuration;
  configuration.developerConfiguration = { ...configuration.developerConfiguration, useEmulation: true };
  configuration.network = { ...configuration.network, defaultNetworkInterface: "masquerade" };
  return cr;
}

/** Installs deploy/ on the cluster of `kubeconfig` and waits for the KubeVirt CR's Available condition. */
export async function installRelease(kubeconfig: string): Promise<void> {
  // The front proxy's CA, copied as deploy/README.md says; before deploy/, so virt-api's volume mounts at once.
  const ca = await kubectlOk(kubeconfig, [
    "-n",
    "kube-system",
    "get",
    "configmap",
    "extension-apiserver-authentication",
    "-o",
    "jsonpath={.data.requestheader-client-ca-file}",
  ]);
  await kubectl(kubeconfig, ["create", "namespace", "kubevirt"]);
  const dir = mkdtempSync(join(tmpdir(), "kvt-e2e-kube-"));
  writeFileSync(join(dir, "requestheader-client-ca-file"), ca);
  await kubectl(kubeconfig, [
    "-n",
    "kubevirt",
    "create",
    "configmap",
    "kubevirt-requestheader-ca",
    `--from-file=requestheader-client-ca-file=${join(dir, "requestheader-client-ca-file")}`,
  ]);
  await kubectlOk(kubeconfig, ["apply", "-k", join(root, "deploy")]);
  await kubectlOk(kubeconfig, ["wait", "--for=condition=Established", "--timeout=60s", "crd/kubevirts.kubevirt.io"]);
  const cr = await kubectlOk(kubeconfig, ["kustomize", join(root, "deploy/kubevirt-cr")]);
  await kubectlOk(kubeconfig, ["apply", "-f", "-"], stringify(emulatedKubeVirtCr(cr)));
  const wait = await kubectl(
    kubeconfig,
    ["-n", "kubevirt", "wait", "kubevirt/kubevirt", "--for=condition=Available", "--timeout=300s"],
    undefined,
    310_000,
  );
  if (wait.code !== 0) {
    const pods = await kubectl(kubeconfig, ["-n", "kubevirt", "get", "pods", "-o", "wide"]);
    const kv = await kubectl(kubeconfig, ["-n", "kubevirt", "get", "kubevirt", "kubevirt", "-o", "yaml"]);
    throw new Error(`The KubeVirt CR is not Available: ${wait.stderr}\n${pods.stdout}\n${kv.stdout}`);
  }
}

/** Starts tools/kube's cluster, pushes the images, installs the release; `stop` tears the cluster down. */
export async function startKubeE2eCluster(): Promise<KubeE2eCluster> {
  const clusterDir = process.env.KVT_E2E_KUBE_DIR ?? join(root, ".data/kube/e2e");
  const where = ["--cluster-dir", clusterDir];
  const stop = async (): Promise<void> => {
    if (process.env.KVT_E2E_KEEP) return log(`kept running: npm run kube -- down --cluster-dir ${clusterDir}`);
    await timed("npm run kube -- down", () => npmRun(["kube", "--", "down", ...where], 120_000));
  };
  if (process.env.KVT_E2E_KUBE_REUSE) {
    // A cluster a kept run left (KVT_E2E_KEEP=1) with the release installed: only the tests run, nothing is torn down.
    const kubeconfig = join(clusterDir, "admin.kubeconfig");
    const nodes = await kubectlOk(kubeconfig, ["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]);
    log(`reusing the running cluster in ${clusterDir} (KVT_E2E_KUBE_REUSE)`);
    return { kubeconfig, nodeNames: nodes.trim().split(/\s+/), stop: async () => undefined };
  }
  try {
    // A fresh cluster: a kept directory's etcd would bring back the last run's objects, and its nodes would pull the
    // last run's release images for the release's pods before this run's push lands (same tags).
    await npmRun(["kube", "--", "down", ...where], 120_000);
    rmSync(clusterDir, { recursive: true, force: true });
    const up = await timed("npm run kube -- up (2 nodes)", () => npmRun(["kube", "--", "up", ...where], 3_600_000));
    const kubeconfig = /export KUBECONFIG=(\S+)/.exec(up.stdout)?.[1];
    const registry = /registry (\S+);/.exec(up.stderr)?.[1];
    if (!kubeconfig || !registry)
      throw new Error(`npm run kube -- up printed no kubeconfig or registry:\n${up.stderr}`);
    const certDir = join(clusterDir, "pki/registry-client.d");
    await timed("npm run images -- push", () =>
      npmRun(["images", "--", "push", "--registry", registry, "--cert-dir", certDir], 1_800_000),
    );
    await timed("the release installed, KubeVirt Available", () => installRelease(kubeconfig));
    const nodes = await kubectlOk(kubeconfig, ["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]);
    return { kubeconfig, nodeNames: nodes.trim().split(/\s+/), stop };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}
