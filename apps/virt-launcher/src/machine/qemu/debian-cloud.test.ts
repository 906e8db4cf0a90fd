// Real QEMU (TCG) with local/debian-cloud (tools/images): the VMI the nested lane's debian group runs on our VMM, here
// on the QEMU backend through the launcher's own spec path: the containerDisk's qcow2 overlay is vda (root=/dev/vda),
// the cloudInitNoCloud ISO is vdb, and the guest's cloud-init applies the user data before the boot marker; the
// image under the overlay keeps its digest.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultVmi, type VirtualMachineInstance } from "@kvt/api";
import { createLogger } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { imageStoreResolver } from "../../vmi/image-store.ts";
import { buildMachineSpec } from "../../vmi/machine-spec.ts";
import { makeWriteLayers } from "../../volumes/container-disk-layer.ts";
import { QemuMachine } from "./qemu-machine.ts";

const root = new URL("../../../../../", import.meta.url).pathname;
const logger = createLogger({ component: "virt-launcher-test", level: "silent" });
const IMAGE = "local/debian-cloud:latest";
const MARKER = "KVT_DEBIAN_CLOUD_BOOTED";
const USER_DATA = [
  "#cloud-config",
  "write_files:",
  "  - path: /var/lib/kvt/user-data.txt",
  '    content: "written by cloud-init on qemu\\n"',
  "runcmd:",
  '  - [ sh, -c, "echo KVT_DEBIAN_USERDATA $(cat /var/lib/kvt/user-data.txt) > /dev/console" ]',
  "",
].join("\n");

async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest("hex");
}

function debianVmi(): VirtualMachineInstance {
  return defaultVmi({
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "debian-cloud", namespace: "default", uid: "0b7c7a52-3a52-4f43-9d4e-2f3c1b0f7e11" },
    spec: {
      domain: {
        resources: { requests: { memory: "512Mi" } },
        devices: {
          disks: [
            { name: "containerdisk", disk: { bus: "virtio" } },
            { name: "cloudinitdisk", disk: { bus: "virtio" } },
          ],
        },
      },
      volumes: [
        { name: "containerdisk", containerDisk: { image: IMAGE } },
        { name: "cloudinitdisk", cloudInitNoCloud: { userData: USER_DATA } },
      ],
    },
  });
}

// systemd and cloud-init's Python stages under TCG on two shared cores: minutes, not seconds.
describe("QemuMachine boots local/debian-cloud from its disk (real QEMU, TCG)", { timeout: 900_000 }, () => {
  it("reaches the boot marker after cloud-init ran the user data from the cidata disk", async () => {
    // Builds the image when missing (root, minutes when cold; a few seconds when current).
    execFileSync(process.execPath, [join(root, "tools/images/src/cli.ts"), "--debian-cloud"], { stdio: "inherit" });
    const dir = mkdtempSync(join(tmpdir(), "kvt-qemu-debian-"));
    const store = process.env.KVT_IMAGE_STORE ?? join(root, ".data/images");
    const spec = await buildMachineSpec(debianVmi(), { resolveImage: imageStoreResolver(store), workDir: dir });
    expect(spec.boot.cmdline).toMatch(/root=\/dev\/vda/);
    expect(spec.disks?.map((d) => d.kind)).toEqual(["containerDisk", "cloudInitNoCloud"]);
    // The containerDisk's qcow2 overlay, as the machine factory makes it for QEMU: systemd and cloud-init write the
    // root filesystem through it, and the image's digest must not change.
    const image = spec.disks?.[0]?.copyFrom ?? "";
    const imageDigest = await sha256File(image);
    const disks = await makeWriteLayers(spec.disks ?? [], "qemu");
    const machine = new QemuMachine({ ...spec, disks }, { logger });
    let text = "";
    machine.on("console", (c) => {
      text += Buffer.from(c).toString("latin1");
    });
    const waitFor = async (re: RegExp, ms: number): Promise<string> => {
      const deadline = Date.now() + ms;
      for (;;) {
        const m = re.exec(text);
        if (m) return m[0];
        if (Date.now() > deadline)
          throw new Error(`console never matched ${re}; last: ${JSON.stringify(text.slice(-800))}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    try {
      const t0 = Date.now();
      await machine.start();
      // The whole marker line (its details end with ")"), not a partial one still arriving.
      const marker = await waitFor(new RegExp(`${MARKER} \\([^\\n]*\\)`), 780_000);
      process.stdout.write(`[debian-cloud on QEMU TCG] ${((Date.now() - t0) / 1000).toFixed(1)} s: ${marker}\n`);
      expect(marker).toContain("cloud-init done");
      await waitFor(/KVT_DEBIAN_USERDATA written by cloud-init on qemu/, 10_000);
    } finally {
      await machine.kill();
    }
    try {
      expect(await sha256File(image)).toBe(imageDigest);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
