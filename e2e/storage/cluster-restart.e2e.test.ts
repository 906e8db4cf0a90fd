/**
 * A claim's data survives a restart of the whole local cluster, as `npm start` users restart it: a second cluster with
 * its own data directory; the demo VM writes a marker to its claim's disk; the cluster stops (every process, launchers
 * included) and starts again on the same data directory; the VM runs again (a new VMI) and reads the marker back, while
 * its emptyDisk comes back empty.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LocalCluster, startLocalCluster } from "@kvt/local-cluster";
import { afterAll, describe, expect, it } from "vitest";
import { kubectlOk } from "../lib/cli.ts";
import { claim, inGuest, MARKER, READ, running, vmWithDisks, WRITE } from "../lib/disk-vm.ts";

const root = new URL("../../", import.meta.url).pathname;
const NAME = "e2e-restart";
const dataDir = mkdtempSync(join(tmpdir(), "kvt-e2e-restart-"));
let cluster: LocalCluster | undefined;

function start(): Promise<LocalCluster> {
  return startLocalCluster({
    projectRoot: root,
    dataDir,
    nodes: 1,
    progress: (m) => process.stdout.write(`[e2e restart cluster] ${m}\n`),
  });
}

afterAll(async () => {
  await cluster?.stop();
  if (!process.env.KVT_E2E_KEEP) rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

describe("a restart of the whole local cluster", () => {
  let uid = "";

  it("a VM writes a marker to its claim's disk", async () => {
    cluster = await start();
    const kubeconfig = cluster.kubeconfig;
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("restart-data", "ReadWriteOnce"));
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vmWithDisks(NAME, "restart-data")));
    uid = (await running(kubeconfig, NAME)).metadata.uid;
    expect(await inGuest(kubeconfig, NAME, uid, WRITE)).toContain("WROTE=0");
  }, 400_000);

  it("after stopping and starting the cluster on the same data directory, the VM runs again and reads it", async () => {
    await cluster?.stop();
    cluster = undefined;
    cluster = await start();
    const kubeconfig = cluster.kubeconfig;
    const again = await running(kubeconfig, NAME, uid);
    const out = await inGuest(kubeconfig, NAME, again.metadata.uid, READ);
    expect(out).toContain(`READ=${MARKER}`);
    expect(out).toContain("SCRATCH=END");
  }, 500_000);
});
