// Real QEMU (TCG), demo image: a live migration of a guest with local writable disks (an emptyDisk and a
// containerDisk's qcow2 overlay) copies them in the migration stream (QEMU's block migration, qemu-migration.ts), so
// the target guest reads what the source guest wrote; the containerDisk's image keeps its digest.

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
import type { MachineDisk, MachineSpec } from "../machine.ts";
import { migrationTlsPair } from "../migration-tls.test-util.ts";
import { QemuMachine } from "./qemu-machine.ts";

const root = new URL("../../../../../", import.meta.url).pathname;
const logger = createLogger({ component: "virt-launcher-test", level: "silent" });
const USER_DATA = "#!/bin/sh\necho 'printed from cloud-init userdata'\n";
const md5 = (b: Uint8Array): string => createHash("md5").update(b).digest("hex");

/** Console text of a machine, and a wait on it from an offset. */
function watch(m: QemuMachine): {
  text: () => string;
  waitFor: (re: RegExp, from: number, ms?: number) => Promise<RegExpMatchArray>;
} {
  let text = "";
  m.on("console", (c) => {
    text += Buffer.from(c).toString("latin1");
  });
  return {
    text: () => text,
    waitFor: async (re, from, ms = 120_000) => {
      const deadline = Date.now() + ms;
      for (;;) {
        const hit = text.slice(from).match(re);
        if (hit) return hit;
        if (Date.now() > deadline) throw new Error(`console never matched ${re}: ${JSON.stringify(text.slice(-400))}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

describe("QemuMachine migrates local disks (real QEMU, TCG, demo image)", { timeout: 480_000 }, () => {
  it("the target guest reads the emptyDisk and containerDisk writes made on the source", async () => {
    execFileSync(process.execPath, [join(root, "tools/images/src/cli.ts")], { stdio: "inherit" });
    const dir = mkdtempSync(join(tmpdir(), "kvt-qemu-blkmig-"));
    const boot = imageStoreResolver(process.env.KVT_IMAGE_STORE ?? join(root, ".data/images"))(
      "local/demo-linux:latest",
    );
    const iso = join(dir, "cidata.iso");
    const identity = { name: "vm-mig", namespace: "default", firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f226" };
    writeFileSync(iso, buildNoCloudDisk({ userData: USER_DATA }, identity, { timestamp: new Date(0) }));
    mkdirSync(join(dir, "image"));
    const image = join(dir, "image", "disk.img");
    writeFileSync(image, Buffer.concat([randomBytes(512), Buffer.alloc((2 << 20) - 512)]));
    const imageMd5 = md5(readFileSync(image));
    const disks = (side: string, incoming: boolean): MachineDisk[] => [
      { name: "cloudinit", path: iso, readOnly: true, kind: "cloudInitNoCloud", shared: true },
      {
        name: "scratch",
        path: join(dir, side, "scratch.img"),
        readOnly: false,
        kind: "emptyDisk",
        shared: false,
        serial: "SCRATCH1",
      },
      {
        name: "root",
        path: join(dir, side, "root.img"),
        readOnly: false,
        kind: "containerDisk",
        shared: false,
        serial: "ROOT1",
        copyFrom: image,
        ...(incoming ? { incoming: true } : {}),
      },
    ];
    const spec = async (side: string, incoming: boolean): Promise<MachineSpec> => {
      mkdirSync(join(dir, side));
      writeFileSync(join(dir, side, "scratch.img"), Buffer.alloc(0));
      execFileSync("truncate", ["-s", "8M", join(dir, side, "scratch.img")]);
      return {
        vmiKey: "default/vm-mig",
        memoryBytes: 256 * 1024 * 1024,
        vcpus: 1,
        boot,
        disks: await makeWriteLayers(disks(side, incoming), "qemu"),
        workDir: join(dir, side, "w"),
      };
    };
    const source = new QemuMachine(await spec("a", false), { logger });
    const target = new QemuMachine(await spec("b", true), { logger });
    const src = watch(source);
    const dst = watch(target);
    try {
      await source.start();
      await src.waitFor(/printed from cloud-init userdata/, 0, 240_000); // TCG boot; CI runs suites side by side
      let from = src.text().length;
      // The two disks by their serials; a marker in each, with fsync.
      const find =
        // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansions, not templates
        'for b in /sys/block/vd*; do s=$(cat $b/serial); [ "$s" = SCRATCH1 ] && S=/dev/${b##*/}; [ "$s" = ROOT1 ] && R=/dev/${b##*/}; done';
      source.writeConsole(
        Buffer.from(
          `${find}; echo kvt-scratch-7 | dd of=$S seek=9 conv=sync,fsync 2>/dev/null; echo kvt-root-8 | dd of=$R seek=3 conv=sync,fsync 2>/dev/null; echo "W=$?"\n`,
        ),
      );
      expect((await src.waitFor(/W=(\d+)\r?\n/, from))[1]).toBe("0");
      const tls = await migrationTlsPair();
      const where = await target.prepareIncoming({ tls: tls.target });
      target.trustMigrationSource(tls.source.certificate);
      // Typed into the target's console before the move completes: held until the guest runs there (QEMU's serial
      // state from the source would otherwise overwrite it), then answered by the shell that moved.
      target.writeConsole(Buffer.from("echo early-$((40+2))\n"));
      const result = await source.migrateTo(where, {
        bandwidthBytesPerSec: 0,
        maxDowntimeMs: 300,
        allowAutoConverge: false,
        completionTimeoutSec: 120,
        progressTimeoutSec: 60,
        tls: tls.source,
      });
      expect(result.failureReason).toBeUndefined();
      expect(result).toMatchObject({ ok: true });
      await dst.waitFor(/early-42\r?\n/, 0);
      from = dst.text().length;
      target.writeConsole(
        Buffer.from(
          `${find}; echo "A=$(dd if=$S skip=9 count=1 2>/dev/null|head -c 13) B=$(dd if=$R skip=3 count=1 2>/dev/null|head -c 10) C=$(dd if=$R count=1 2>/dev/null|md5sum|head -c 32)"\n`,
        ),
      );
      const read = await dst.waitFor(/A=(\S*) B=(\S*) C=([0-9a-f]{32})/, from);
      expect(read[1]).toBe("kvt-scratch-7");
      expect(read[2]).toBe("kvt-root-8");
      expect(read[3]).toBe(md5(readFileSync(image).subarray(0, 512))); // the image's data under the overlay
    } finally {
      await source.kill();
      await target.kill();
    }
    try {
      expect(md5(readFileSync(image))).toBe(imageMd5);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
