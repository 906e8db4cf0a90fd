/**
 * The release images end to end: build (cached in .data/oci-images), push every image to a throwaway
 * docker-registry on 127.0.0.1, pull the launcher back with skopeo, and run each component's entrypoint with
 * `--help` under a real OCI runtime (crun, or runc where crun cannot run: see oci-runtime.ts); QEMU inside the
 * launcher image boots the demo containerDisk's kernel with TCG.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultStoreRoot, readManifest, TEST_GUEST_IMAGE } from "@kvt/images";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BuiltImage, buildImages } from "./build-images.ts";
import { ensureHostTools, TEST_TOOLS } from "./host-tools.ts";
import { type LocalRegistry, startLocalRegistry } from "./local-registry.ts";
import type { OciLayout } from "./oci-layout.ts";
import { pickRuntime, prepareBundle, type RuntimeChoice, runContainer, unpackImage } from "./oci-runtime.ts";
import { pullImage, pushImages } from "./push-images.ts";
import { IMAGES, PROJECT_ROOT } from "./release-images.ts";
import { formatSizes, KUBEVIRT_LAUNCHER_REFERENCE_BYTES } from "./size-report.ts";

const isRoot = process.getuid?.() === 0;

/** Whether the build had a test guest to pack (native/'s ELF, or the store's copy), as buildImages() decides. */
function hasTestGuest(): boolean {
  return (
    existsSync(join(PROJECT_ROOT, "native/build/guest/kvt-test-guest.elf")) ||
    readManifest(defaultStoreRoot(), TEST_GUEST_IMAGE) !== undefined
  );
}
const log = (line: string): void => void process.stdout.write(`[oci-images test] ${line}\n`);

let tmp = "";
let layout: OciLayout;
let images: readonly BuiltImage[] = [];
let registry: LocalRegistry | undefined;
let pushed: string[] = [];
let runtime: RuntimeChoice;
const pulledLayout = (): string => join(tmp, "pulled");

function image(tag: string): BuiltImage {
  const found = images.find((i) => i.tag === tag);
  if (!found) throw new Error(`no image ${tag}`);
  return found;
}

describe.skipIf(!isRoot)("release OCI images", () => {
  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), "kvt-oci-images-"));
    const started = performance.now();
    const built = await buildImages({ log });
    ({ layout, images } = built);
    log(`build: ${((performance.now() - started) / 1000).toFixed(1)} s`);
    log(formatSizes(images));
    await ensureHostTools(TEST_TOOLS, log);
    registry = await startLocalRegistry(join(tmp, "registry"));
    pushed = await pushImages(layout, images, { registry: registry.address, workDir: tmp, log });
    await pullImage(`${registry.address}/${image("virt-launcher").reference}`, pulledLayout(), "virt-launcher", {
      workDir: tmp,
    });
    const probe = join(tmp, "probe");
    await unpackImage(layout.ref("virt-api"), probe);
    prepareBundle(probe, { extraArgs: ["--help"] });
    runtime = pickRuntime(probe);
    if (runtime.crunFailure) log(`crun cannot run here (${runtime.crunFailure}); using runc`);
  }, 900_000);

  afterAll(async () => {
    await registry?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("builds every image, the launcher well under KubeVirt's virt-launcher", () => {
    const disks = hasTestGuest() ? ["demo-linux", "test-guest"] : ["demo-linux"];
    expect(images.map((i) => i.tag).sort()).toEqual([...IMAGES.map((i) => i.tag), ...disks].sort());
    for (const i of images) expect(i.compressedBytes).toBeGreaterThan(0);
    expect(image("virt-launcher").uncompressedBytes).toBeLessThan(KUBEVIRT_LAUNCHER_REFERENCE_BYTES / 2);
    // The components share one base layer: the bottom layer of each is the same blob.
    const bottoms = new Set(IMAGES.map((i) => layout.info(i.tag).layers[0]?.digest));
    expect(bottoms.size).toBe(1);
  });

  it("pushes every image to the registry and pulls the launcher back unchanged", async () => {
    expect(pushed).toHaveLength(images.length);
    const res = await fetch(`http://${registry?.address}/v2/_catalog`);
    const catalog = (await res.json()) as { repositories: string[] };
    expect(catalog.repositories.sort()).toEqual(images.map((i) => i.reference.split(":")[0]).sort());
    const index = JSON.parse(readFileSync(join(pulledLayout(), "index.json"), "utf8")) as {
      manifests: { digest: string }[];
    };
    expect(index.manifests[0]?.digest).toBe(image("virt-launcher").manifestDigest);
  });

  it.each(IMAGES.map((i) => i.tag))(
    "runs %s's entrypoint with --help under a real OCI runtime",
    async (tag) => {
      const bundle = join(tmp, `bundle-${tag}`);
      // The launcher runs from the copy pulled back from the registry, the others from the build's layout.
      await unpackImage(tag === "virt-launcher" ? `${pulledLayout()}:${tag}` : layout.ref(tag), bundle);
      prepareBundle(bundle, { extraArgs: ["--help"] });
      const result = await runContainer(runtime.runtime, bundle, `kvt-${tag}-${process.pid}`);
      expect(result.stderr).toBe("");
      expect(result.stdout).toMatch(new RegExp(`^${tag} \\d+\\.\\d+\\.\\d+: .*\\nUsage: ${tag} `));
      expect(result.code).toBe(0);
      rmSync(bundle, { recursive: true, force: true });
    },
    120_000,
  );

  it.each(IMAGES.flatMap((i) => i.commands.map((c) => [i.tag, c.path, c.name] as const)))(
    "runs %s's %s, the command its pods name, with --help",
    async (tag, path, name) => {
      const bundle = join(tmp, `bundle-${tag}-${name}`);
      await unpackImage(layout.ref(tag), bundle);
      prepareBundle(bundle, { args: [path, "--help"] });
      const result = await runContainer(runtime.runtime, bundle, `kvt-${name}-${process.pid}`);
      expect(result.stderr).toBe("");
      expect(result.stdout).toMatch(new RegExp(`^${name} \\d+\\.\\d+\\.\\d+: .*\\nUsage: ${name} `));
      expect(result.code).toBe(0);
      rmSync(bundle, { recursive: true, force: true });
    },
    120_000,
  );

  it("lays out local/demo-linux as a kernelBoot containerDisk owned by qemu (107)", async () => {
    const bundle = join(tmp, "bundle-demo");
    await unpackImage(layout.ref("demo-linux"), bundle);
    for (const file of ["boot/vmlinuz", "boot/initrd.img"]) {
      const st = statSync(join(bundle, "rootfs", file));
      expect([st.uid, st.gid, st.size > 1_000_000]).toEqual([107, 107, true]);
    }
  });

  it("carries each containerDisk's manifest at /image.json, paths relative to the image root", async () => {
    for (const tag of hasTestGuest() ? ["demo-linux", "test-guest"] : ["demo-linux"]) {
      const bundle = join(tmp, `bundle-${tag}`);
      if (!existsSync(bundle)) await unpackImage(layout.ref(tag), bundle);
      const rootfs = join(bundle, "rootfs");
      const manifest = JSON.parse(readFileSync(join(rootfs, "image.json"), "utf8")) as Record<string, unknown>;
      const stored = readManifest(defaultStoreRoot(), `local/${tag}:latest`);
      expect(manifest).toMatchObject({
        schemaVersion: 1,
        image: `local/${tag}:latest`,
        kernel: "boot/vmlinuz",
        cmdline: stored?.cmdline,
        pvmSafe: stored?.pvmSafe,
      });
      for (const key of ["kernel", "initrd", "disk"]) {
        const file = manifest[key];
        if (typeof file !== "string") continue;
        const st = statSync(join(rootfs, file));
        expect([file, st.uid, st.gid, st.size > 0]).toEqual([file, 107, 107, true]);
      }
    }
  });

  it("boots the demo kernel with QEMU (TCG) inside the launcher image, as its user", async () => {
    const bundle = join(tmp, "bundle-qemu");
    await unpackImage(`${pulledLayout()}:virt-launcher`, bundle);
    const demo = join(tmp, "bundle-demo");
    if (!existsSync(demo)) await unpackImage(layout.ref("demo-linux"), demo);
    const boot = join(demo, "rootfs/boot");
    const args = ["/usr/bin/qemu-system-x86_64", "-M", "pc", "-accel", "tcg", "-nodefaults", "-no-user-config"];
    args.push("-display", "none", "-m", "256", "-serial", "stdio", "-no-reboot");
    args.push("-kernel", "/vmi/boot/vmlinuz", "-initrd", "/vmi/boot/initrd.img");
    args.push("-append", "console=ttyS0 panic=-1", "-device", "virtio-net-pci,netdev=n0", "-netdev", "user,id=n0");
    prepareBundle(bundle, { args, mounts: [{ source: boot, destination: "/vmi/boot" }] });
    const result = await runContainer(runtime.runtime, bundle, `kvt-qemu-${process.pid}`, {
      until: /KVT_DEMO_LINUX_BOOTED/,
      timeoutMs: 150_000,
    });
    expect(result.stderr).not.toMatch(/could not|failed to/i);
    expect(result.stdout).toContain("Linux version");
    expect(result.stdout).toContain("KVT_DEMO_LINUX_BOOTED");
  }, 180_000);
});
