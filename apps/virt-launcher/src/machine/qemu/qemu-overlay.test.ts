// Real QEMU (TCG) with the demo image: a containerDisk's qcow2 overlay (container-disk-layer.ts) takes the guest's
// writes while the image under it keeps its digest.

import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { imageStoreResolver } from "../../vmi/image-store.ts";
import { buildNoCloudDisk } from "../../volumes/cloud-init-disks.ts";
import { makeWriteLayers } from "../../volumes/container-disk-layer.ts";
import { ensureQemuUtils, qemuImg } from "../../volumes/host-qemu-img.ts";
import type { MachineDisk } from "../machine.ts";
import { QemuMachine } from "./qemu-machine.ts";

const root = new URL("../../../../../", import.meta.url).pathname;
const logger = createLogger({ component: "virt-launcher-test", level: "silent" });
const USER_DATA = "#!/bin/sh\necho 'printed from cloud-init userdata'\n";
const md5 = (b: Uint8Array): string => createHash("md5").update(b).digest("hex");

describe("QemuMachine with a containerDisk overlay (real QEMU, TCG, demo image)", { timeout: 240_000 }, () => {
  it("the guest reads the image through the overlay and writes only the overlay", async () => {
    execFileSync(process.execPath, [join(root, "tools/images/src/cli.ts")], { stdio: "inherit" });
    await ensureQemuUtils();
    const dir = mkdtempSync(join(tmpdir(), "kvt-qemu-overlay-"));
    const boot = imageStoreResolver(process.env.KVT_IMAGE_STORE ?? join(root, ".data/images"))(
      "local/demo-linux:latest",
    );
    const iso = join(dir, "cidata.iso");
    const identity = { name: "vm-ovl", namespace: "default", firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f225" };
    writeFileSync(iso, buildNoCloudDisk({ userData: USER_DATA }, identity, { timestamp: new Date(0) }));
    // The containerDisk image: 4 MiB raw, random sector 0, in its own directory (as the image store has it).
    mkdirSync(join(dir, "image"));
    const image = join(dir, "image", "disk.img");
    const sector0 = randomBytes(512);
    const bytes = Buffer.alloc(4 << 20);
    sector0.copy(bytes);
    writeFileSync(image, bytes);
    const before = md5(readFileSync(image));
    const planned: MachineDisk[] = [
      { name: "cloudinit", path: iso, readOnly: true, kind: "cloudInitNoCloud", shared: true },
      {
        name: "root",
        path: join(dir, "ephemeral", "root.img"),
        readOnly: false,
        kind: "containerDisk",
        shared: false,
        fresh: true,
        serial: "CDISK1",
        copyFrom: image,
      },
    ];
    const disks = await makeWriteLayers(planned, "qemu");
    const machine = new QemuMachine(
      { vmiKey: "default/vm-ovl", memoryBytes: 256 * 1024 * 1024, vcpus: 1, boot, disks, workDir: join(dir, "w") },
      { logger },
    );
    let text = "";
    machine.on("console", (c) => {
      text += Buffer.from(c).toString("latin1");
    });
    const waitFor = async (re: RegExp, ms: number, from: number): Promise<RegExpMatchArray> => {
      const deadline = Date.now() + ms;
      for (;;) {
        const m = text.slice(from).match(re);
        if (m) return m;
        if (Date.now() > deadline) throw new Error(`console never matched ${re}: ${JSON.stringify(text.slice(-400))}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    try {
      await machine.start();
      await waitFor(/printed from cloud-init userdata/, 120_000, 0);
      const from = text.length;
      machine.writeConsole(
        Buffer.from(
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template
          'for b in /sys/block/vd*; do grep -q CDISK1 $b/serial 2>/dev/null && D=/dev/${b##*/}; done; echo "S=$(dd if=$D count=1 2>/dev/null|md5sum)"; echo kvt-$((40+2)) | dd of=$D seek=100 conv=sync,fsync 2>/dev/null; echo "W=$? D=$D"\n',
        ),
      );
      const s = await waitFor(/S=([0-9a-f]{32})/, 30_000, from);
      expect(s[1]).toBe(md5(sector0));
      const w = await waitFor(/W=(\d+) D=(\S*)\r?\n/, 30_000, from);
      expect(w[1]).toBe("0");
      expect(w[2]).toMatch(/^\/dev\/vd[a-z]$/);
    } finally {
      await machine.kill();
    }
    try {
      expect(md5(readFileSync(image))).toBe(before);
      expect(qemuImg("check", "-f", "qcow2", disks[1].path)).toContain("No errors were found");
      const merged = join(dir, "merged.raw");
      qemuImg("convert", "-f", "qcow2", "-O", "raw", disks[1].path, merged);
      const m = readFileSync(merged);
      expect(m.subarray(0, 512)).toEqual(sector0);
      expect(m.subarray(100 * 512, 100 * 512 + 7).toString()).toBe("kvt-42\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
