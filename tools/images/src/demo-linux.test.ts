import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { listCpio } from "./cpio.ts";
import { buildDemoLinux, DEMO_BOOT_MARKER, DEMO_LINUX_IMAGE } from "./demo-linux.ts";
import { NET_TOOL_PACKAGES } from "./net-tools.ts";
import { SSH_SERVER_PACKAGES } from "./ssh-server.ts";
import { imageDir, readManifest } from "./store.ts";
import { registerTestGuest, TEST_GUEST_IMAGE } from "./test-guest.ts";

// Builds into the project's default store (.data/images) so the result is cached for later runs and `npm start`.
describe("buildDemoLinux()", () => {
  it("builds local/demo-linux:latest from Debian packages, then skips a rebuild", { timeout: 300_000 }, async () => {
    const first = await buildDemoLinux();
    expect(first.manifest.image).toBe(DEMO_LINUX_IMAGE);
    expect(first.manifest.sources.map((s) => s.name)).toEqual([
      expect.stringMatching(/^linux-image-\d.*-amd64$/),
      "busybox-static",
      ...SSH_SERVER_PACKAGES,
      ...NET_TOOL_PACKAGES,
    ]);
    const vmlinuz = readFileSync(join(first.dir, "vmlinuz"));
    expect(vmlinuz.toString("latin1", 0x202, 0x206)).toBe("HdrS"); // a bzImage (Linux boot protocol header)
    // Its payload unpacked beside it (xz-utils is on this machine): the ELF vmlinux the native VMM boots.
    expect(first.manifest.uncompressedKernel).toBe("vmlinux");
    expect(readFileSync(join(first.dir, "vmlinux")).toString("latin1", 0, 4)).toBe("\x7fELF");
    const files = listCpio(readFileSync(join(first.dir, "initrd.img")));
    const byPath = new Map(files.map((f) => [f.path, f]));
    const init = byPath.get("init");
    expect(init && (init.mode & 0o111) !== 0).toBe(true);
    const initText = Buffer.from(init?.data ?? []).toString("utf8");
    expect(initText).toContain(DEMO_BOOT_MARKER);
    expect(initText).toContain("LABEL=cidata");
    expect(byPath.get("dev/console")?.mode).toBe(0o020600);
    expect(byPath.get("bin/busybox")?.size).toBeGreaterThan(500_000);
    expect(byPath.has("bin/sh") && byPath.has("sbin/init") && byPath.has("sbin/poweroff")).toBe(true);
    const inittab = Buffer.from(byPath.get("etc/inittab")?.data ?? []).toString();
    expect(inittab).toMatch(/::ctrlaltdel:\/sbin\/poweroff/);
    expect(inittab).toMatch(/::respawn:\/sbin\/acpid -f/);
    expect((byPath.get("etc/acpi/PWRF/00000080")?.mode ?? 0) & 0o111).not.toBe(0); // acpid's power-button action
    // The SSH server: dropbear started by init, sftp-server at dropbear's compiled-in path, the loader where programs
    // look for it, and the libraries they load.
    expect(inittab).toMatch(/::respawn:\/usr\/sbin\/dropbear -F -R -s /);
    for (const p of [
      "usr/sbin/dropbear",
      "usr/bin/dropbearkey",
      "usr/lib/sftp-server",
      "usr/bin/iperf3",
      "lib/x86_64-linux-gnu/libc.so.6",
      "lib/x86_64-linux-gnu/libiperf.so.0",
    ])
      expect((byPath.get(p)?.mode ?? 0) & 0o111, p).not.toBe(0);
    const loader = byPath.get("lib64/ld-linux-x86-64.so.2");
    expect((loader?.mode ?? 0) & 0o170000).toBe(0o120000);
    expect(Buffer.from(loader?.data ?? []).toString()).toBe("../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
    if (process.getuid?.() === 0) {
      // The programs run with only what the image holds (chroot into its unpacked files).
      const root = unpack(files);
      try {
        expect(execFileSync("chroot", [root, "/usr/sbin/dropbear", "-V"], { stdio: "pipe" }).toString()).toBe("");
        const key = execFileSync("chroot", [root, "/usr/bin/dropbearkey", "-t", "ed25519", "-f", "/k"]).toString();
        expect(key).toMatch(/^ssh-ed25519 AAAA/m);
        // iperf3 for the network bench, with its libraries (libiperf, libssl, libcrypto, libsctp).
        expect(execFileSync("chroot", [root, "/usr/bin/iperf3", "--version"]).toString()).toMatch(/^iperf 3\./);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    }
    const order = Buffer.from(byPath.get("etc/kvt/modules")?.data ?? [])
      .toString()
      .trim()
      .split("\n");
    const names = order.map((p) => p.split("/").pop());
    for (const m of ["virtio_blk.ko", "virtio_net.ko", "virtio_pci.ko", "isofs.ko", "vfat.ko", "button.ko", "evdev.ko"])
      expect(names).toContain(m);
    expect(names.indexOf("net_failover.ko")).toBeLessThan(names.indexOf("virtio_net.ko"));
    expect(names.indexOf("virtio.ko")).toBeLessThan(names.indexOf("virtio_blk.ko")); // dependencies first
    expect(names.indexOf("fat.ko")).toBeLessThan(names.indexOf("vfat.ko"));
    for (const p of order)
      expect(byPath.has(`lib/modules/${first.manifest.sources[0]?.name.slice(12)}/${p}`)).toBe(true);

    const again = await buildDemoLinux();
    expect(again.skipped).toBe(true);
    expect(again.manifest.inputsDigest).toBe(first.manifest.inputsDigest);
  });
});

/** Writes the cpio entries (directories, files, symlinks) under a new temporary directory; returns it. */
function unpack(entries: ReturnType<typeof listCpio>): string {
  const root = mkdtempSync(join(tmpdir(), "kvt-initrd-"));
  for (const e of entries) {
    const path = join(root, e.path);
    const type = e.mode & 0o170000;
    if (type === 0o040000) mkdirSync(path, { recursive: true });
    else if (type === 0o120000) {
      mkdirSync(dirname(path), { recursive: true });
      symlinkSync(Buffer.from(e.data).toString(), path);
    } else if (type === 0o100000) {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, e.data);
      chmodSync(path, e.mode & 0o7777);
    }
  }
  return root;
}

describe("registerTestGuest()", () => {
  it("stores an ELF as local/test-guest:latest and rejects a non-ELF", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-images-"));
    try {
      const elf = join(dir, "guest.elf");
      writeFileSync(elf, Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46]), Buffer.alloc(60)]));
      const store = join(dir, "store");
      const r = registerTestGuest(elf, store);
      expect(r.dir).toBe(imageDir(store, TEST_GUEST_IMAGE));
      expect(readManifest(store, TEST_GUEST_IMAGE)?.pvmSafe).toBe(true);
      expect(registerTestGuest(elf, store).skipped).toBe(true);
      writeFileSync(join(dir, "not-elf"), "hello");
      expect(() => registerTestGuest(join(dir, "not-elf"), store)).toThrow(/not an ELF/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("cloud-config.awk", () => {
  it.each(["host awk", "the image's busybox awk"])(
    "turns write_files and runcmd into a script that does them (%s)",
    { timeout: 300_000 },
    async (which) => {
      const dir = mkdtempSync(join(tmpdir(), "kvt-cc-"));
      try {
        let awkCmd = ["awk"];
        if (which !== "host awk") {
          const built = await buildDemoLinux();
          const busybox = listCpio(readFileSync(join(built.dir, "initrd.img"))).find((f) => f.path === "bin/busybox");
          writeFileSync(join(dir, "busybox"), busybox?.data ?? new Uint8Array(), { mode: 0o755 });
          awkCmd = [join(dir, "busybox"), "awk"];
        }
        const ud = join(dir, "user-data");
        mkdirSync(join(dir, "out"), { recursive: true });
        rmSync(join(dir, "out"), { recursive: true });
        writeFileSync(
          ud,
          [
            "#cloud-config",
            "write_files:",
            `  - path: ${dir}/out/hello.txt`,
            "    permissions: '0600'",
            "    content: |",
            "      line one",
            "      it's two",
            `  - path: ${dir}/out/b64`,
            "    encoding: b64",
            "    content: aGVsbG8K",
            "runcmd:",
            `  - echo "ran" > ${dir}/out/ran`,
            `  - [ sh, -c, "echo list >> ${dir}/out/ran" ]`,
            "",
          ].join("\n"),
        );
        const awk = new URL("./guest/cloud-config.awk", import.meta.url).pathname;
        const script = execFileSync(awkCmd[0] ?? "awk", [...awkCmd.slice(1), "-f", awk, ud]).toString();
        execFileSync("sh", ["-c", script]);
        expect(readFileSync(join(dir, "out/hello.txt"), "utf8")).toBe("line one\nit's two\n");
        expect(readFileSync(join(dir, "out/b64"), "utf8")).toBe("hello\n");
        expect(readFileSync(join(dir, "out/ran"), "utf8")).toBe("ran\nlist\n");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

describe("the SSH keys of the seed", () => {
  const awkOf = async (which: string, dir: string): Promise<string[]> => {
    if (which === "host awk") return ["awk"];
    const built = await buildDemoLinux();
    const busybox = listCpio(readFileSync(join(built.dir, "initrd.img"))).find((f) => f.path === "bin/busybox");
    writeFileSync(join(dir, "busybox"), busybox?.data ?? new Uint8Array(), { mode: 0o755 });
    return [join(dir, "busybox"), "awk"];
  };
  const run = (awk: string[], program: string, input: string): string =>
    execFileSync(awk[0] ?? "awk", [
      ...awk.slice(1),
      "-f",
      new URL(`./guest/${program}`, import.meta.url).pathname,
      input,
    ]).toString();

  it.each(["host awk", "the image's busybox awk"])(
    "public-keys.awk prints KubeVirt's meta-data public-keys, one per line (%s)",
    { timeout: 300_000 },
    async (which) => {
      const dir = mkdtempSync(join(tmpdir(), "kvt-pk-"));
      try {
        const awk = await awkOf(which, dir);
        const md = join(dir, "meta-data");
        writeFileSync(
          md,
          '{"instance-id":"6a1","local-hostname":"vm1","public-keys":{"0":"ssh-ed25519 AAAAC3 a@b","1":"ssh-rsa AAAAB3 \\u003cc\\u003e \\"q\\""}}\n',
        );
        expect(run(awk, "public-keys.awk", md)).toBe('ssh-ed25519 AAAAC3 a@b\nssh-rsa AAAAB3 <c> "q"\n');
        writeFileSync(md, '{"instance-id":"6a1","local-hostname":"vm1"}\n');
        expect(run(awk, "public-keys.awk", md)).toBe("");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it.each(["host awk", "the image's busybox awk"])(
    "cloud-config ssh_authorized_keys (block and flow lists) become root's authorized keys (%s)",
    { timeout: 300_000 },
    async (which) => {
      const dir = mkdtempSync(join(tmpdir(), "kvt-ak-"));
      try {
        const awk = await awkOf(which, dir);
        const ud = join(dir, "user-data");
        writeFileSync(
          ud,
          [
            "#cloud-config",
            "ssh_authorized_keys:",
            "  - ssh-ed25519 AAAA1 one@x",
            "  - 'ssh-rsa AAAA2 it''s'",
            "",
          ].join("\n"),
        );
        // Run against a stand-in for /root, so the test never touches this machine's keys.
        const script = run(awk, "cloud-config.awk", ud).replaceAll("/root/", `${dir}/root/`);
        execFileSync("sh", ["-c", script]);
        expect(readFileSync(join(dir, "root/.ssh/authorized_keys"), "utf8")).toBe(
          "ssh-ed25519 AAAA1 one@x\nssh-rsa AAAA2 it's\n",
        );
        writeFileSync(ud, '#cloud-config\nssh_authorized_keys: [ "k1 a", k2 ]\n');
        expect(run(awk, "cloud-config.awk", ud)).toContain("printf '%s\\n' 'k2' >>/root/.ssh/authorized_keys");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
