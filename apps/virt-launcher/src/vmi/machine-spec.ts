/**
 * VMI spec -> MachineSpec (pure apart from the image lookup it is given). What a backend needs, nothing more:
 *
 *   spec.domain.memory.guest | resources.requests.memory | resources.limits.memory  -> memoryBytes
 *   spec.domain.cpu sockets x cores x threads | resources cpu (rounded up) | 1       -> vcpus
 *   spec.domain.firmware.kernelBoot.container {image, kernelPath, initrdPath}
 *     + kernelBoot.kernelArgs                                                        -> boot (kernel boot)
 *   else the first containerDisk volume (its image's kernel, initrd and cmdline)     -> boot
 *   spec.domain.firmware.uuid                                                        -> firmwareUuid
 *   spec.domain.devices.disks with their volumes (disks.ts; cloud-init as ISO disks)  -> disks
 *   memoryBytes is raised to the image's minMemoryBytes when the VMI asks for less than the image boots with
 *
 * Anything unusable becomes a {@link SpecError} listing every cause with its field path, so the VMI can fail with
 * one clear reason instead of a stack trace.
 */
import { tryParseQuantity, type VirtualMachineInstance } from "@kvt/api";
import { MasqueradeError, type PodNetworkPlan, planPodNetwork } from "@kvt/pod-network";
import type { BootSource, MachineSpec } from "../machine/machine.ts";
import { copiedOnMigration, planDisks, prepareDisks, type VolumeMount } from "./disks.ts";
import { fileInImage, ImageNotFoundError, type ImageResolver } from "./image-store.ts";

/** One thing wrong with the spec, KubeVirt StatusCause-style. */
export interface SpecCause {
  readonly field: string;
  readonly message: string;
}

/** The VMI cannot be turned into a machine; `causes` says why, field by field. */
export class SpecError extends Error {
  override readonly name = "SpecError";
  readonly causes: readonly SpecCause[];
  constructor(causes: readonly SpecCause[]) {
    super(`Cannot build a machine from the VMI: ${causes.map((c) => `${c.field}: ${c.message}`).join("; ")}`);
    this.causes = causes;
  }
}

/** Which end of a migration the spec is made for (a target's copied disks start empty); "source" otherwise. */
export type SpecRole = "source" | "target";

/** What {@link toMachineSpec} needs besides the VMI. */
export interface SpecContext {
  readonly resolveImage: ImageResolver;
  /** The launcher's scratch directory. */
  readonly workDir: string;
  /** The pod's volume mounts as the process-kubelet maps them (KVT_VOLUME_MOUNTS); none on a real node. */
  readonly mounts?: readonly VolumeMount[];
}

const DOMAIN = "spec.domain";

/** Maps `vmi` to a MachineSpec; throws {@link SpecError} with every problem found. */
export function toMachineSpec(vmi: VirtualMachineInstance, ctx: SpecContext): MachineSpec {
  const causes: SpecCause[] = [];
  const memoryBytes = memoryOf(vmi, causes);
  const vcpus = vcpusOf(vmi, causes);
  const boot = bootOf(vmi, ctx, causes);
  const disks = planDisks(
    vmi,
    { resolveImage: ctx.resolveImage, mounts: ctx.mounts ?? [], workDir: ctx.workDir },
    causes,
  );
  const podNetwork = podNetworkOf(vmi, causes);
  if (causes.length > 0 || memoryBytes === undefined || boot === undefined) throw new SpecError(causes);
  const uuid = vmi.spec?.domain?.firmware?.uuid;
  return {
    vmiKey: `${vmi.metadata?.namespace ?? "default"}/${vmi.metadata?.name ?? ""}`,
    // An image that cannot boot in what the VMI asks for (the seed's 64M with a stock Debian kernel) gets its minimum.
    memoryBytes: Math.max(memoryBytes, boot.minMemoryBytes ?? 0),
    vcpus,
    boot,
    ...(uuid ? { firmwareUuid: uuid } : {}),
    workDir: ctx.workDir,
    ...(disks.length > 0 ? { disks } : {}),
    ...(podNetwork ? { podNetwork } : {}),
  };
}

/**
 * {@link toMachineSpec}, then its disk files made ready ({@link prepareDisks}; a migration target's copied disks start
 * empty); throws SpecError for either.
 */
export async function buildMachineSpec(
  vmi: VirtualMachineInstance,
  ctx: SpecContext,
  role: SpecRole = "source",
): Promise<MachineSpec> {
  const spec = toMachineSpec(vmi, ctx);
  const causes = await prepareDisks(spec.disks ?? []);
  if (causes.length > 0) throw new SpecError(causes);
  if (role !== "target" || !spec.disks) return spec;
  // A migration target's copied containerDisk layers start empty: the source's stream fills them.
  return { ...spec, disks: spec.disks.map((d) => (d.copyFrom && copiedOnMigration(d) ? { ...d, incoming: true } : d)) };
}

function memoryOf(vmi: VirtualMachineInstance, causes: SpecCause[]): number | undefined {
  const domain = vmi.spec?.domain;
  const candidates: [string, string | number | undefined][] = [
    [`${DOMAIN}.memory.guest`, domain?.memory?.guest],
    [`${DOMAIN}.resources.requests.memory`, domain?.resources?.requests?.memory],
    [`${DOMAIN}.resources.limits.memory`, domain?.resources?.limits?.memory],
  ];
  const found = candidates.find(([, v]) => v !== undefined);
  if (!found) {
    causes.push({ field: `${DOMAIN}.memory.guest`, message: "no guest memory given (memory.guest or resources)" });
    return undefined;
  }
  // Bytes as apimachinery reads the quantity (exact, rounded up); undefined when Kubernetes would refuse it.
  const bytes = tryParseQuantity(found[1])?.value();
  if (bytes === undefined || bytes < 1n << 20n) {
    causes.push({ field: found[0], message: `"${String(found[1])}" is not a memory size of at least 1Mi` });
    return undefined;
  }
  // Guest memory is page-granular: round down to 4 KiB as hypervisors do.
  return Number(bytes - (bytes % 4096n));
}

function vcpusOf(vmi: VirtualMachineInstance, causes: SpecCause[]): number {
  const domain = vmi.spec?.domain;
  const cpu = domain?.cpu;
  if (cpu && (cpu.sockets !== undefined || cpu.cores !== undefined || cpu.threads !== undefined)) {
    const n = (cpu.sockets ?? 1) * (cpu.cores ?? 1) * (cpu.threads ?? 1);
    if (!Number.isInteger(n) || n < 1 || n > 256) {
      causes.push({ field: `${DOMAIN}.cpu`, message: `sockets x cores x threads = ${n} is not in [1, 256]` });
      return 1;
    }
    return n;
  }
  const request = domain?.resources?.limits?.cpu ?? domain?.resources?.requests?.cpu;
  if (request === undefined) return 1;
  const milli = tryParseQuantity(request)?.milliValue();
  const n = milli === undefined ? undefined : Number(milli) / 1000;
  if (n === undefined || n <= 0) {
    causes.push({ field: `${DOMAIN}.resources.requests.cpu`, message: `"${String(request)}" is not a CPU quantity` });
    return 1;
  }
  return Math.min(256, Math.max(1, Math.ceil(n)));
}

function bootOf(vmi: VirtualMachineInstance, ctx: SpecContext, causes: SpecCause[]): BootSource | undefined {
  const kernelBoot = vmi.spec?.domain?.firmware?.kernelBoot;
  const field = `${DOMAIN}.firmware.kernelBoot.container`;
  try {
    if (kernelBoot?.container) {
      const image = ctx.resolveImage(kernelBoot.container.image);
      const initrd = kernelBoot.container.initrdPath;
      const kernelPath = kernelBoot.container.kernelPath
        ? fileInImage(image, kernelBoot.container.kernelPath)
        : image.kernelPath;
      return {
        kernelPath,
        // The image's uncompressed copy stands in only for the image's own kernel, not for another file named.
        ...(kernelPath === image.kernelPath && image.uncompressedKernelPath
          ? { uncompressedKernelPath: image.uncompressedKernelPath }
          : {}),
        ...(initrd
          ? { initrdPath: fileInImage(image, initrd) }
          : image.initrdPath
            ? { initrdPath: image.initrdPath }
            : {}),
        cmdline: kernelBoot.kernelArgs ?? image.cmdline,
        pvmSafe: image.pvmSafe,
        ...(image.minMemoryBytes ? { minMemoryBytes: image.minMemoryBytes } : {}),
      };
    }
  } catch (error) {
    causes.push({ field, message: messageOf(error) });
    return undefined;
  }
  const volumes = vmi.spec?.volumes ?? [];
  const index = volumes.findIndex((v) => v.containerDisk !== undefined);
  const volume = volumes[index];
  if (!volume?.containerDisk) {
    causes.push({
      field: "spec.volumes",
      message: "nothing to boot: no kernelBoot container and no containerDisk volume",
    });
    return undefined;
  }
  try {
    const image = ctx.resolveImage(volume.containerDisk.image);
    return {
      kernelPath: image.kernelPath,
      ...(image.uncompressedKernelPath ? { uncompressedKernelPath: image.uncompressedKernelPath } : {}),
      ...(image.initrdPath ? { initrdPath: image.initrdPath } : {}),
      cmdline: kernelBoot?.kernelArgs ?? image.cmdline,
      pvmSafe: image.pvmSafe,
      ...(image.minMemoryBytes ? { minMemoryBytes: image.minMemoryBytes } : {}),
    };
  } catch (error) {
    causes.push({ field: `spec.volumes[${index}].containerDisk.image`, message: messageOf(error) });
    return undefined;
  }
}

function messageOf(error: unknown): string {
  if (error instanceof ImageNotFoundError || error instanceof Error) return error.message;
  return String(error);
}

/** The pod interface's plan (masquerade or bridge); a field it cannot wire becomes a cause. */
function podNetworkOf(vmi: VirtualMachineInstance, causes: SpecCause[]): PodNetworkPlan | undefined {
  try {
    return planPodNetwork(vmi);
  } catch (error) {
    if (!(error instanceof MasqueradeError)) throw error;
    causes.push({ field: "spec.domain.devices.interfaces", message: error.message });
    return undefined;
  }
}
