/**
 * VMI volumes as KubeVirt's components read them (pure): where each volume is found inside the launcher pod, the
 * guest device name each disk gets, the `status.volumeStatus` entries, and whether the volumes allow a live
 * migration (KubeVirt `pkg/virt-handler` checkVolumesForMigration, `pkg/storage/types` pvc helpers).
 *
 *   volume source            in the launcher pod                                      migration
 *   persistentVolumeClaim    /var/run/kubevirt-private/vmi-disks/<volume>/disk.img   shared only when the claim is RWX
 *     (volumeMode Block)     the raw device at /dev/<volume> (volumeDevices)          the same
 *   hostDisk                 /var/run/kubevirt-private/vmi-disks/<volume>/<basename>  only with `shared: true`
 *   emptyDisk, containerDisk /var/run/kubevirt-ephemeral-disks/...                    copied to the target
 *   containerDisk's image    an image volume at /var/run/kubevirt/image-volumes/<volume> (read only; the write layer
 *     (and kernelBoot's)     is in ephemeral-disks), kernelBoot's at .../kernel-boot-volume
 *   cloud-init, config ISOs  made by the launcher                                     made again on the target
 *   configMap, secret,       the kubelet's files at the *_SOURCE_DIR paths below;      made again on the target
 *   downwardAPI, svc account the launcher makes their ISOs from them
 */
import type { Disk, VirtualMachineInstance, Volume } from "../types.ts";

/** Where PVC and hostDisk volumes are mounted in the launcher's compute container (KubeVirt's hostdisk dir). */
export const VMI_DISKS_DIR = "/var/run/kubevirt-private/vmi-disks";
/**
 * Where the compute container mounts each containerDisk's image (a pod image volume, `volumes[].image`, the kubelet's
 * ImageVolume; docs/decisions/0018-containerdisk-image-volumes.md): `<IMAGE_VOLUMES_DIR>/<volume>`.
 */
export const IMAGE_VOLUMES_DIR = "/var/run/kubevirt/image-volumes";
/** The pod volume name of `firmware.kernelBoot.container`'s image (KubeVirt's KernelBootVolumeName). */
export const KERNEL_BOOT_VOLUME = "kernel-boot-volume";
/** Where the compute container finds the image of VMI volume `volume` (or of {@link KERNEL_BOOT_VOLUME}). */
export function imageVolumePath(volume: string): string {
  return `${IMAGE_VOLUMES_DIR}/${volume}`;
}
/** The pod-lifetime scratch volume for emptyDisk images and containerDisk overlays (KubeVirt's ephemeral-disks). */
export const EPHEMERAL_DISKS_DIR = "/var/run/kubevirt-ephemeral-disks";
/** The pod volume name of {@link EPHEMERAL_DISKS_DIR}. */
export const EPHEMERAL_DISKS_VOLUME = "ephemeral-disks";
/** The compute container's private directory (KubeVirt's VirtPrivateDir): the console log, the launcher's scratch. */
export const VIRT_PRIVATE_DIR = "/var/run/kubevirt-private";
/** The pod volume (an emptyDir) mounted at {@link VIRT_PRIVATE_DIR} (KubeVirt's `private`). */
export const PRIVATE_VOLUME = "private";
/** Where the launcher listens (`launcher-sock`), virt-handler reaching it through the kubelet's pods directory. */
export const VIRT_SOCKETS_DIR = "/var/run/kubevirt/sockets";
/** The pod volume (an emptyDir) mounted at {@link VIRT_SOCKETS_DIR} (KubeVirt's `sockets`). */
export const SOCKETS_VOLUME = "sockets";
/** Where a configMap volume's files are mounted in the compute container (KubeVirt's ConfigMapSourceDir/<volume>). */
export const CONFIG_MAP_SOURCE_DIR = "/var/run/kubevirt-private/config-map";
/** Where a secret volume's files are mounted (KubeVirt's SecretSourceDir/<volume>). */
export const SECRET_SOURCE_DIR = "/var/run/kubevirt-private/secret";
/** Where a downwardAPI volume's files are mounted (KubeVirt's DownwardAPISourceDir/<volume>). */
export const DOWNWARD_API_SOURCE_DIR = "/var/run/kubevirt-private/downwardapi";
/** Where the serviceAccount volume's token, ca.crt and namespace are (KubeVirt's ServiceAccountSourceDir). */
export const SERVICE_ACCOUNT_SOURCE_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** The image file inside a Filesystem-mode claim (KubeVirt creates it when missing). */
export const PVC_DISK_IMAGE = "disk.img";

/**
 * Where a Block claim's device appears in the launcher's compute container (KubeVirt's volumepath.BlockDevice): the
 * pod template's volumeDevices path, and where virt-launcher looks for the raw device (then no disk.img is used).
 */
export function blockDevicePath(volumeName: string): string {
  return `/dev/${volumeName}`;
}

/** KubeVirt's IsPVCBlock: the claim's volumeMode is Block (unset means Filesystem). */
export function isPvcBlock(volumeMode: string | undefined): boolean {
  return volumeMode === "Block";
}

/** A claim's facts as `status.volumeStatus[].persistentVolumeClaimInfo` carries them. */
export interface PersistentVolumeClaimInfo {
  claimName?: string;
  accessModes?: string[];
  volumeMode?: string;
  capacity?: Record<string, string>;
  requests?: Record<string, string>;
  /** Fraction of the filesystem kept free when sizing disk.img ("0.055" is KubeVirt's default). */
  filesystemOverhead?: string;
}

/** One `status.volumeStatus` entry (KubeVirt `VolumeStatus`). */
export interface VolumeStatus {
  name: string;
  target: string;
  phase?: string;
  reason?: string;
  message?: string;
  persistentVolumeClaimInfo?: PersistentVolumeClaimInfo;
  size?: number;
}

/** KubeVirt's default filesystem overhead for disk.img in a Filesystem-mode claim (CDI's 5.5%). */
export const DEFAULT_FILESYSTEM_OVERHEAD = "0.055";

/** The claim a volume reads, if it reads one (persistentVolumeClaim, dataVolume, ephemeral). */
export function claimOfVolume(volume: Volume): string | undefined {
  return (
    volume.persistentVolumeClaim?.claimName ??
    volume.dataVolume?.name ??
    volume.ephemeral?.persistentVolumeClaim?.claimName
  );
}

/** A disk's bus as its target says, else KubeVirt's default for what it is: sata for a CD-ROM, virtio otherwise. */
export function diskBus(disk: Disk): string {
  return disk.disk?.bus ?? disk.cdrom?.bus ?? disk.lun?.bus ?? (disk.cdrom ? "sata" : "virtio");
}

/** `status.volumeStatus` with its entries typed (the schema declares them freeform). */
export function volumeStatuses(status: VirtualMachineInstance["status"]): VolumeStatus[] {
  return (status?.volumeStatus ?? []) as unknown as VolumeStatus[];
}

/** The guest device name KubeVirt gives each disk: vda, vdb ... for virtio, sda ... for sata/scsi, in disk order. */
export function diskTargets(disks: readonly Disk[]): Map<string, string> {
  const next = new Map<string, number>();
  const targets = new Map<string, string>();
  for (const disk of disks) {
    const prefix = diskBus(disk) === "virtio" ? "vd" : "sd";
    const n = next.get(prefix) ?? 0;
    next.set(prefix, n + 1);
    targets.set(disk.name, prefix + deviceSuffix(n));
  }
  return targets;
}

/** 0 -> a, 25 -> z, 26 -> aa (the kernel's sd/vd naming). */
function deviceSuffix(n: number): string {
  let s = "";
  let i = n;
  do {
    s = String.fromCharCode(97 + (i % 26)) + s;
    i = Math.floor(i / 26) - 1;
  } while (i >= 0);
  return s;
}

/** The claim's info for `volumeStatus`, from the PersistentVolumeClaim object (its status once bound). */
export function claimInfo(pvc: {
  metadata?: { name?: string };
  spec?: { accessModes?: string[]; volumeMode?: string; resources?: { requests?: Record<string, string> } };
  status?: { accessModes?: string[]; capacity?: Record<string, string> };
}): PersistentVolumeClaimInfo {
  const accessModes = pvc.status?.accessModes ?? pvc.spec?.accessModes;
  return {
    claimName: pvc.metadata?.name ?? "",
    ...(accessModes ? { accessModes: [...accessModes] } : {}),
    volumeMode: pvc.spec?.volumeMode ?? "Filesystem",
    ...(pvc.status?.capacity ? { capacity: { ...pvc.status.capacity } } : {}),
    ...(pvc.spec?.resources?.requests ? { requests: { ...pvc.spec.resources.requests } } : {}),
    filesystemOverhead: DEFAULT_FILESYSTEM_OVERHEAD,
  };
}

/**
 * The volumeStatus KubeVirt's controller keeps: one entry per volume a disk uses, with its target, and the claim's
 * info for claim-backed volumes (`claims` looks a claim up by name; undefined while it does not exist).
 */
export function volumeStatusOf(
  vmi: VirtualMachineInstance,
  claims: (name: string) => PersistentVolumeClaimInfo | undefined,
): VolumeStatus[] {
  const targets = diskTargets(vmi.spec.domain.devices.disks ?? []);
  const out: VolumeStatus[] = [];
  for (const volume of vmi.spec.volumes ?? []) {
    const target = targets.get(volume.name);
    if (target === undefined) continue;
    const claim = claimOfVolume(volume);
    const info = claim === undefined ? undefined : claims(claim);
    out.push({ name: volume.name, target, ...(info ? { persistentVolumeClaimInfo: info } : {}) });
  }
  return out;
}

/** True when the access modes let two nodes use the claim at once (KubeVirt's HasSharedAccessMode). */
export function hasSharedAccessMode(modes: readonly string[] | undefined): boolean {
  return (modes ?? []).includes("ReadWriteMany");
}

/**
 * Why the VMI's volumes forbid a live migration (KubeVirt's messages, reason DisksNotLiveMigratable), or undefined
 * when they allow one: every claim must be ReadWriteMany and every hostDisk shared. Local disks (containerDisk,
 * emptyDisk, ephemeral) are copied with the memory, so they allow it.
 */
export function volumesMigrationBlocker(vmi: VirtualMachineInstance): string | undefined {
  const status = new Map(volumeStatuses(vmi.status).map((s) => [s.name, s]));
  for (const volume of vmi.spec.volumes ?? []) {
    const claim = volume.persistentVolumeClaim?.claimName ?? volume.dataVolume?.name;
    if (claim !== undefined) {
      const info = status.get(volume.name)?.persistentVolumeClaimInfo;
      if (!info) {
        return `cannot migrate VMI: Unable to determine if PVC ${claim} is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)`;
      }
      if (!hasSharedAccessMode(info.accessModes)) {
        return `cannot migrate VMI: PVC ${claim} is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)`;
      }
    } else if (volume.hostDisk && volume.hostDisk.shared !== true) {
      return "cannot migrate VMI with non-shared HostDisk";
    }
  }
  return undefined;
}
