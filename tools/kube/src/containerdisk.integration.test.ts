/**
 * A containerDisk on a real node, the way virt-controller's launcher pod reaches it
 * (docs/decisions/0018-containerdisk-image-volumes.md): a containerDisk image laid out by tools/oci-images'
 * `stageContainerDisk` (what `npm run images` pushes for local/demo-linux and local/test-guest) is pushed to the
 * cluster's registry; a pod declares it as an image volume, mounted read-only at the path the compute container uses
 * (`/var/run/kubevirt/image-volumes/<volume>`, @kvt/api IMAGE_VOLUMES_DIR); the real kubelet and containerd pull
 * and mount it, and the pod reads the image's `/image.json` and the kernel, initrd and disk it names, byte for byte,
 * owned by qemu (107), read-only. If the kubelet, containerd or the image layout stop giving the launcher its disk,
 * this fails.
 *
 * Needs the binaries of `npm run kube -- build` and root, as kube-nodes.integration.test.ts: without them the suite
 * is skipped and says so (CI does not build the Kubernetes binaries yet).
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ImageManifest } from "@kvt/images";
import { LayerDir, OciLayout, pushImages, stageContainerDisk } from "@kvt/oci-images";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_DATA_DIR } from "./build.ts";
import { down, up } from "./cluster.ts";
import { BUILT, kubectlWithInput, ROOT, skipNote } from "./integration.test-util.ts";
import { tagImage } from "./node-images.ts";

const why = skipNote("network namespaces, cgroups and mounts");

/** Where the launcher's compute container finds containerDisk volume `containerdisk` (@kvt/api imageVolumePath). */
const MOUNT = "/var/run/kubevirt/image-volumes/containerdisk";
const REFERENCE = "local/kvt-probe-disk:1";

const kubectl = kubectlWithInput;

const sha256 = (data: Buffer): string => createHash("sha256").update(data).digest("hex");

describe.skipIf(!BUILT || !ROOT)(`a containerDisk image volume on a real node${why}`, () => {
  const work = join(tmpdir(), `kvt-kube-containerdisk-${randomUUID().slice(0, 8)}`);
  const clusterDir = join(work, "cluster");
  const where = { dataDir: DEFAULT_DATA_DIR, clusterDir };
  afterAll(async () => {
    await down(where);
    rmSync(work, { recursive: true, force: true });
  }, 120_000); // `down` takes 15 s on a quiet machine; vitest's default 10 s failed it in a loaded CI run

  it("mounts the containerDisk's image.json, kernel, initrd and disk read-only where the launcher reads them", async () => {
    // A store entry as tools/images writes one, packed as `npm run images` packs containerDisks.
    const store = join(work, "store");
    mkdirSync(store, { recursive: true });
    const files = { vmlinuz: randomBytes(8192), "initrd.img": randomBytes(4096), "disk.img": randomBytes(65536) };
    for (const [name, data] of Object.entries(files)) writeFileSync(join(store, name), data);
    const manifest: ImageManifest = {
      schemaVersion: 1,
      image: REFERENCE,
      kernel: "vmlinuz",
      initrd: "initrd.img",
      disk: "disk.img",
      cmdline: "console=ttyS0 probe",
      pvmSafe: false,
      inputsDigest: `sha256:${sha256(files.vmlinuz)}`,
      sources: [{ name: "probe", version: "1" }],
      builtAt: new Date(0).toISOString(),
    };
    const layer = new LayerDir(join(work, "stage"));
    stageContainerDisk(layer, store, manifest);
    const layout = new OciLayout(join(work, "layout"));
    await layout.init();
    const image = await tagImage(layout, "probe-disk", REFERENCE, layer, { labels: {} });

    const result = await up({ ...where, nodes: 1, log: () => undefined });
    await pushImages(layout, [image], {
      registry: result.registry,
      insecure: false,
      certDir: result.registryCertDir,
      workDir: work,
    });

    const script = [
      `cat ${MOUNT}/image.json`,
      "echo ---",
      `sha256sum ${MOUNT}/boot/vmlinuz ${MOUNT}/boot/initrd.img ${MOUNT}/disk/disk.img`,
      `stat -c '%n %u:%g' ${MOUNT}/image.json ${MOUNT}/boot/vmlinuz ${MOUNT}/disk/disk.img`,
      `touch ${MOUNT}/written 2>&1 || true`,
      "echo done",
      "exec sleep 3600",
    ].join("; ");
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "disk-reader", namespace: "default" },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: "compute",
            image: result.images.busybox,
            command: ["sh", "-c", script],
            volumeMounts: [{ name: "containerdisk", mountPath: MOUNT, readOnly: true }],
          },
        ],
        // As virt-controller renders a containerDisk volume (pod-template.ts).
        volumes: [{ name: "containerdisk", image: { reference: REFERENCE, pullPolicy: "IfNotPresent" } }],
      },
    };
    await kubectl(result.kubeconfig, JSON.stringify(pod), "create", "-f", "-");
    await kubectl(result.kubeconfig, "", "wait", "--for=condition=Ready", "pod/disk-reader", "--timeout=120s");
    let log = "";
    await expect
      .poll(
        async () => {
          log = await kubectl(result.kubeconfig, "", "logs", "disk-reader");
          return log.endsWith("done");
        },
        { timeout: 30_000 },
      )
      .toBe(true);
    const [json = "", after = ""] = log.split("\n---\n");
    const rest = after.split("\n");
    expect(JSON.parse(json)).toEqual({
      schemaVersion: 1,
      image: REFERENCE,
      kernel: "boot/vmlinuz",
      initrd: "boot/initrd.img",
      disk: "disk/disk.img",
      cmdline: "console=ttyS0 probe",
      pvmSafe: false,
      sources: [{ name: "probe", version: "1" }],
    });
    expect(rest).toEqual([
      `${sha256(files.vmlinuz)}  ${MOUNT}/boot/vmlinuz`,
      `${sha256(files["initrd.img"])}  ${MOUNT}/boot/initrd.img`,
      `${sha256(files["disk.img"])}  ${MOUNT}/disk/disk.img`,
      `${MOUNT}/image.json 107:107`,
      `${MOUNT}/boot/vmlinuz 107:107`,
      `${MOUNT}/disk/disk.img 107:107`,
      `touch: ${MOUNT}/written: Read-only file system`,
      "done",
    ]);
    const events = await kubectl(
      result.kubeconfig,
      "",
      ...["get", "events", "--field-selector", "involvedObject.name=disk-reader,reason=Pulled"],
      ...["-o", "jsonpath={.items[*].message}"],
    );
    expect(events).toContain(`Successfully pulled image "${REFERENCE}"`);
  }, 300_000);
});
