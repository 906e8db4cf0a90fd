/**
 * A kubelet rotates a chatty container's log to its size cap (copy-and-truncate into one `.1` copy, the container
 * keeping its descriptor), and the guest-console-log container copies a console file that the launcher
 * rotates by rename without losing or repeating a line. The container is testdata/chatty-launcher.ts.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CORE_V1, kubeConfigFromFile, type ResourceClient, RestClient, resourceClient } from "@kvt/kube";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { eventually } from "../apiserver/extensions/testdata/fixtures.ts";
import { currentRuntimeName, jsRuntime } from "../cluster/js-runtime.ts";
import type { V1Pod } from "../cluster/kube-models.ts";
import { Kubelet } from "./kubelet.ts";

const CHATTY = new URL("./testdata/chatty-launcher.ts", import.meta.url).pathname;
const CAP = 256 * 1024;
let dir: string;
let api: ApiServerHandle;
let kubelet: Kubelet;
let pods: ResourceClient<V1Pod>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-log-rotation-"));
  api = await startApiServer({ inMemory: true, logger: pino({ level: "silent" }) });
  const transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
  pods = resourceClient<V1Pod>(transport, CORE_V1.pods);
  const runtime = jsRuntime(currentRuntimeName(), dir);
  kubelet = new Kubelet({
    nodeName: "node01",
    transport,
    dataDir: join(dir, "data"),
    layout: {
      projectRoot: dir,
      execPath: runtime.execPath,
      execArgs: runtime.execArgs,
      launcherEntry: CHATTY,
    },
    log: pino({ level: "silent" }),
    containerLogMaxBytes: CAP,
  });
  await kubelet.start();
}, 60_000);

afterAll(async () => {
  await kubelet?.stop();
  await api?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("container logs on a process-kubelet", () => {
  it("are rotated to the cap when a container writes 2 MiB, and the console copy survives the launcher's rotation", async () => {
    await pods.create({
      metadata: { name: "chatty", namespace: "default" },
      spec: {
        nodeName: "node01",
        terminationGracePeriodSeconds: 2,
        containers: [
          { name: "compute", image: "kubevirt/virt-launcher", command: ["/usr/bin/virt-launcher-monitor"] },
          {
            name: "guest-console-log",
            image: "kubevirt/virt-launcher",
            command: ["/usr/bin/virt-tail", "--logfile", "virt-serial0-log"],
          },
        ],
      },
    });
    const pod = await eventually("the pod to run", async () => {
      const p = await pods.get("default", "chatty");
      return p.status?.phase === "Running" ? p : undefined;
    });
    const podDir = kubelet.podDir(pod.metadata?.uid ?? "");
    const compute = join(podDir, "compute.log");
    await eventually("the container to finish writing, and the log to be rotated under the cap", async () => {
      if (!existsSync(`${compute}.1`)) return undefined;
      // "done" is the last line written: in the current file, or in the copy if a rotation came after it.
      const done =
        readFileSync(compute, "utf8").endsWith("done\n") || readFileSync(`${compute}.1`, "utf8").endsWith("done\n");
      return done && statSync(compute).size <= CAP ? true : undefined;
    });
    expect(statSync(`${compute}.1`).size).toBeGreaterThan(CAP);
    // One rotated copy, never a growing set of files (the kubelet checks every 2 s: between two checks a file may
    // pass the cap by what was written meanwhile).
    expect(
      readdirSync(podDir)
        .filter((f) => f.startsWith("compute.log"))
        .sort(),
    ).toEqual(["compute.log", "compute.log.1"]);

    const consoleCopy = join(podDir, "guest-console-log.log");
    const lines = await eventually("all 4000 console lines copied", async () => {
      const got = readFileSync(consoleCopy, "utf8").split("\n").filter(Boolean);
      return got.length >= 4000 ? got : undefined;
    });
    expect(lines).toEqual(Array.from({ length: 4000 }, (_, i) => `console ${String(i).padStart(4, "0")}`));
    await pods.delete("default", "chatty");
  }, 60_000);
});
