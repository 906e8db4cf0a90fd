import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registerTestGuest } from "@kvt/images";
import { LauncherClient, launcherSocketPath } from "@kvt/launcher-rpc";
import { hasKvm, testGuestPath } from "@kvt/vmm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildLauncherImage } from "./launcher-image.ts";

const projectRoot = new URL("../../../../", import.meta.url).pathname;
let dir: string;
let entry: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-limg-"));
  entry = await buildLauncherImage(projectRoot, join(dir, "image"));
}, 120_000);
afterAll(() => {
  child?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

describe("the launcher image", () => {
  it("is virt-launcher: the bundle answers --help like the sources", () => {
    const run = spawnSync(process.execPath, [entry, "--help"], { encoding: "utf8" });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^Usage: virt-launcher /m);
    // Module-relative paths point at the sources, not at the bundle's directory.
    expect(readFileSync(entry, "utf8")).toContain(`${new URL("native/index.ts", `file://${projectRoot}`).href}`);
  });

  it.skipIf(!hasKvm())(
    "boots the test guest through the native addon found beside the sources",
    async () => {
      const store = join(dir, "images");
      registerTestGuest(testGuestPath(), store);
      const uid = "5eed0000aaaa1111bbbb";
      child = spawn(process.execPath, [entry, "--namespace", "default", "--name", "g", "--uid", uid], {
        env: { PATH: process.env.PATH, KUBEVIRT_POD_DIR: dir, KVT_IMAGE_STORE: store, LOG_LEVEL: "silent" },
        stdio: "ignore",
      });
      const client = new LauncherClient(launcherSocketPath(dir, uid.slice(0, 16)), { timeoutMs: 2000 });
      await expect
        .poll(async () => (await client.info().catch(() => undefined))?.state, { timeout: 30_000, interval: 20 })
        .toBe("NoDomain");
      const vmi = {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstance",
        metadata: { name: "g", namespace: "default", uid },
        spec: {
          domain: {
            devices: {},
            resources: { requests: { memory: "64Mi" } },
            firmware: { kernelBoot: { kernelArgs: "pattern=idle tick=20" } },
          },
          volumes: [{ name: "disk", containerDisk: { image: "local/test-guest:latest" } }],
        },
      };
      expect((await client.sync({ vmi }, { timeoutMs: 30_000 })).state).toBe("Running");
      await expect
        .poll(() => readFileSync(join(dir, "virt-serial0-log"), "utf8"), { timeout: 10_000 })
        .toContain("kvt-guest progress n=2 ");
    },
    60_000,
  );
});
