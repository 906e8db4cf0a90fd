/**
 * The checked-in CRDs against a real API server: the local cluster's embedded API server (run as a process, so this
 * library keeps no build dependency on tools/) driven by the real kubectl. Covers the "Done when": the CRDs
 * apply, `kubectl explain vm.spec.runStrategy` describes the field, vm-cirros is accepted and strict decoding
 * refuses unknown fields.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const node = join(root, "node_modules/.bin/node");
const apiserverMain = join(root, "tools/local-cluster/src/apiserver/main.ts");
const crdsYaml = join(root, "libs/api/crds/all.yaml");
const cirros = join(root, "libs/api/src/testdata/vm-cirros.yaml");

let dir = "";
let server: ChildProcess | undefined;

function kubectl(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      "kubectl",
      ["--kubeconfig", join(dir, "kubeconfig"), "--cache-dir", join(dir, "cache"), ...args],
      { timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    if (stdin !== undefined) child.stdin?.end(stdin);
  });
}

async function waitFor(file: string, proc: ChildProcess): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (existsSync(file)) return;
    if (proc.exitCode !== null) throw new Error(`the API server exited with ${proc.exitCode}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("the API server wrote no kubeconfig within 60 s");
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-api-crds-"));
  server = spawn(
    node,
    [apiserverMain, "--data-dir", dir, "--kubeconfig", join(dir, "kubeconfig"), "--log-level", "warn"],
    {
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  await waitFor(join(dir, "kubeconfig"), server);
}, 90_000);

afterAll(async () => {
  const proc = server;
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe("the CRDs on the local API server, through kubectl", () => {
  it("apply, and kubectl explain describes spec.runStrategy", async () => {
    const applied = await kubectl(["apply", "-f", crdsYaml]);
    expect(applied.stderr).toBe("");
    expect(applied.stdout).toContain(
      "customresourcedefinition.apiextensions.k8s.io/virtualmachines.kubevirt.io created",
    );
    // The CRDs become Established and appear in discovery shortly after the create: ask until they do.
    let explained = await kubectl(["explain", "vm.spec.runStrategy"]);
    for (let i = 0; i < 60 && explained.code !== 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      explained = await kubectl(["explain", "vm.spec.runStrategy"]);
    }
    expect(explained.stderr).toBe("");
    expect(explained.stdout).toContain("FIELD: runStrategy <string>");
    expect(explained.stdout).toContain('"RerunOnFailure": VMI will initially be running');
  }, 90_000);

  it("vm-cirros is created and listed with the VM printer columns", async () => {
    expect((await kubectl(["create", "-f", cirros])).stdout).toContain("virtualmachine.kubevirt.io/vm-cirros created");
    const got = await kubectl(["get", "vm"]);
    expect(got.stdout.split("\n")[0]?.split(/\s+/)).toEqual(["NAME", "AGE", "STATUS", "READY"]);
  }, 60_000);

  it("an unknown field is refused by strict decoding", async () => {
    const manifest =
      "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: bogus}\nspec: {runStrategy: Halted, bogus: 1, template: {spec: {domain: {devices: {}}}}}\n";
    const created = await kubectl(["create", "-f", "-"], manifest);
    expect(created.code).not.toBe(0);
    expect(created.stderr).toContain('strict decoding error: unknown field "spec.bogus"');
  }, 60_000);
});
