/** The size table printed after a build, against KubeVirt's own virt-launcher image. */
import type { BuiltImage } from "./build-images.ts";

/**
 * KubeVirt's own virt-launcher image, for comparison: about 600 MB as `docker images` reports it (unpacked), once
 * kubevirt/kubevirt#4703 trimmed it from ~800 MB (maintainer's figure in kubevirt/kubevirt#4565; #4423 lists 745 MB
 * for v0.33). It carries libvirt, QEMU with its modules and firmware, and a CentOS Stream base.
 */
export const KUBEVIRT_LAUNCHER_REFERENCE_BYTES = 600_000_000;

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** One line per image: compressed (pull) and unpacked size; the launcher's against KubeVirt's. */
export function formatSizes(images: readonly BuiltImage[]): string {
  const width = Math.max(...images.map((i) => i.reference.length));
  const lines = images.map(
    (i) =>
      `  ${i.reference.padEnd(width)}  ${mib(i.compressedBytes).padStart(10)} compressed  ${mib(i.uncompressedBytes).padStart(10)} unpacked${i.skipped ? "  (current)" : ""}`,
  );
  const launcher = images.find((i) => i.tag === "virt-launcher");
  if (launcher) {
    const under = KUBEVIRT_LAUNCHER_REFERENCE_BYTES - launcher.uncompressedBytes;
    lines.push(
      `  virt-launcher unpacked is ${mib(under)} under KubeVirt's ~600 MB (${mib(KUBEVIRT_LAUNCHER_REFERENCE_BYTES)}) virt-launcher: ${((100 * launcher.uncompressedBytes) / KUBEVIRT_LAUNCHER_REFERENCE_BYTES).toFixed(0)}% of it`,
    );
  }
  return `image sizes:\n${lines.join("\n")}`;
}
