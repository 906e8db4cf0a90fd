/**
 * The one interface virt-launcher drives a guest through. Two backends implement it: the native VMM (our C++
 * addon via @kvt/vmm; primary) and QEMU in TCG mode (software emulation, KubeVirt's `useEmulation`).
 *
 * Lifecycle (every backend):
 *
 *   created --start()--> running <--pause()/resume()--> paused
 *      |                   |  \
 *      |                   |   `--(guest powers off)--> stopped (exitCode 0)      shutdown(grace): ask the guest
 *      |                   `--(crash/kill)----------> crashed (reason)            (ACPI / Ctrl-Alt-Del), then kill
 *      `-- migration target: prepareIncoming() ... incoming migration completes --> running
 *
 * Events are delivered in order through `on()`; console bytes are batched chunks, never one byte per event.
 */

/** Where the guest's boot artifacts come from (a resolved containerDisk / kernelBoot). */
import type {
  MigrationOptions,
  MigrationOutcome,
  MigrationProgress,
  MigrationTarget,
  MigrationTlsIdentity,
} from "@kvt/migration/types";
import type { PodNetworkPlan } from "@kvt/pod-network";
export interface BootSource {
  /** Absolute path of the kernel (bzImage or a PVH ELF such as the test guest). */
  readonly kernelPath: string;
  /**
   * The same kernel uncompressed (an ELF vmlinux), when the image ships it: a backend that boots it directly (the
   * native VMM, as Firecracker does) skips the kernel's self-decompression; QEMU keeps `kernelPath`.
   */
  readonly uncompressedKernelPath?: string;
  /** Absolute path of the initramfs, if any. */
  readonly initrdPath?: string;
  /** Kernel command line (console=ttyS0 etc. are the backend's to add when missing). */
  readonly cmdline: string;
  /** True for guests known to run on a PVM KVM (the test guest): ring-0 kept tiny, work in ring 3. */
  readonly pvmSafe: boolean;
  /** The least memory the image boots with (from its image manifest), when known. */
  readonly minMemoryBytes?: number;
}

/** One disk of the guest: a raw image file on this node, a virtio disk in the guest (spec order: vda, vdb, ...). */
export interface MachineDisk {
  /** The volume's name. */
  readonly name: string;
  /** The raw image file, or the raw block device when {@link block}. */
  readonly path: string;
  /**
   * `path` is a block device (a Block claim's, KubeVirt's `type='block'` disk): used as it is, never created or
   * sized (the device's size is the disk's); QEMU opens it with its host_device driver.
   */
  readonly block?: boolean;
  readonly readOnly: boolean;
  /** The bus (KubeVirt's disk/cdrom bus): virtio on both backends; sata and scsi on QEMU only. */
  readonly bus?: "virtio" | "sata" | "scsi";
  /** A CD-ROM (read-only, media) rather than a hard disk. */
  readonly cdrom?: boolean;
  /** What the guest reads as the disk's serial (spec.domain.devices.disks[].serial). */
  readonly serial?: string;
  /** KubeVirt's cache mode (QEMU maps it; the native VMM always writes through to the host file). */
  readonly cache?: "none" | "writethrough" | "writeback";
  readonly io?: "native" | "threads";
  readonly bootOrder?: number;
  /** The volume source, for messages. */
  readonly kind:
    | "persistentVolumeClaim"
    | "hostDisk"
    | "emptyDisk"
    | "containerDisk"
    | "cloudInitNoCloud"
    | "cloudInitConfigDrive"
    | "configMap"
    | "secret"
    | "serviceAccount"
    | "downwardAPI"
    | "ephemeral";
  /** Both ends of a migration see the same file (an RWX claim, a shared hostDisk). */
  readonly shared: boolean;
  /** Create the file at this size when it is missing (sparse). */
  readonly createBytes?: number;
  /** Make it anew at every start (emptyDisk, containerDisk copy): nothing survives a restart. */
  readonly fresh?: boolean;
  /** Write these bytes to `path` first (a cloud-init or config ISO the launcher made). */
  readonly contents?: Uint8Array;
  /** The containerDisk's image (raw or qcow2, never written): the machine factory makes the disk's write layer at
   *  `path` over it for the chosen backend (volumes/container-disk-layer.ts), which then clears this field. */
  readonly copyFrom?: string;
  /** A migration target's disk: its write layer starts empty and the source's stream fills it. */
  readonly incoming?: boolean;
  /** Native VMM: `path` is a copy-on-write overlay over this raw image (virtio-blk reads unwritten blocks there). */
  readonly base?: string;
  /** The format of `path` as QEMU opens it (default raw): qcow2 for a containerDisk's overlay or a qcow2 image. */
  readonly format?: "raw" | "qcow2";
  /** The directory the volume is mounted at; it must exist. */
  readonly requireDir?: string;
}

/** Everything a backend needs to build a guest; derived from the VMI spec by the launcher. */
export interface MachineSpec {
  /** `namespace/name` of the VMI, for logs and metrics. */
  readonly vmiKey: string;
  readonly memoryBytes: number;
  readonly vcpus: number;
  readonly boot: BootSource;
  /** spec.domain.firmware.uuid: visible to the guest as the SMBIOS system UUID where the backend can. */
  readonly firmwareUuid?: string;
  /** A scratch directory owned by this launcher (sockets, seed images). */
  readonly workDir: string;
  /** The VMI's disks, in spec order (none: the guest boots from its kernel and initramfs alone). */
  readonly disks?: readonly MachineDisk[];
  /** The pod network's binding (network/pod-network.ts: masquerade or bridge), when the VMI asks for one. */
  readonly podNetwork?: PodNetworkPlan;
  /** Virtio NICs, each on a tap the launcher wired (eth0, eth1, ... in the guest). */
  readonly nics?: readonly MachineNic[];
}

/** One virtio-net NIC of the guest on a host tap. */
export interface MachineNic {
  readonly tap: string;
  readonly mac: string;
  /** KubeVirt's model (default virtio); the native VMM has virtio only. */
  readonly model?: string;
  /**
   * The kernel's vhost-net data path, as libvirt picks it for KubeVirt: "auto" (the default) where /dev/vhost-net
   * opens, "on" (required), "off" (the VMM's userspace path). Both backends (QEMU: `-netdev tap,vhost=`).
   */
  readonly vhost?: "off" | "auto" | "on";
}

/** Observable state of the guest. */
export type MachineState = "created" | "running" | "paused" | "stopped" | "crashed";

/** Which implementation runs the guest. */
export type MachineBackend = "native" | "qemu";

/** Counters for `domain stats` and the per-VMI metrics. */
export interface MachineStats {
  readonly state: MachineState;
  /** Seconds each vCPU spent running guest code, by vCPU index. */
  readonly vcpuSeconds: readonly number[];
  readonly memoryBytes: number;
  /** Resident memory of the guest (bytes actually backed on the host), when known. */
  readonly residentBytes?: number;
}

/** Events a machine emits. */
export interface MachineEvents {
  /** A chunk of serial console output. */
  console: (chunk: Uint8Array) => void;
  /** The state changed; `reason` explains stopped/crashed. */
  state: (state: MachineState, reason?: string) => void;
  /** Live-migration progress (source side). */
  "migration-progress": (progress: MigrationProgress) => void;
}

/** The engine's target address and options (libs/migration types.ts) are what every backend takes. */
export type { MigrationOptions, MigrationTarget, MigrationTlsIdentity };

/** How a target listens. */
export interface IncomingOptions {
  /** This launcher's TLS identity (its handler minted it): the stream arrives over TLS, the source's certificate
   *  pinned through trustMigrationSource(); `false` only under KubeVirt's migrations.disableTLS (a plain stream). */
  readonly tls: MigrationTlsIdentity | false;
}

/** Progress samples and outcomes travel to virt-handler as the engine reports them. */
export type { MigrationProgress };
export type MigrationResult = MigrationOutcome;

/**
 * A request this backend cannot honour for this guest (e.g. soft reboot without ACPI or a guest agent); the launcher
 * answers it with 409 Conflict, as KubeVirt does, instead of an internal error.
 */
export class MachineUnsupportedError extends Error {
  override readonly name = "MachineUnsupportedError";
}

/** How to start a guest. */
export interface StartOptions {
  /** Set the guest up paused: not one instruction runs before resume() (VMI spec.startStrategy Paused). */
  readonly paused?: boolean;
}

/** One guest, whatever runs it. */
export interface Machine {
  readonly backend: MachineBackend;
  readonly state: MachineState;
  /** Why this guest cannot be live-migrated on this backend, when it cannot (LiveMigratable=False). */
  readonly notMigratableReason?: string;
  /**
   * Boots the guest. Resolves once the guest is executing, or, with `paused` (KubeVirt's startStrategy Paused), once
   * it is set up without having executed anything: the first resume() runs it.
   */
  start(options?: StartOptions): Promise<void>;
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Asks the guest to power off; kills it if it has not after `gracePeriodMs`. Resolves when stopped. */
  shutdown(gracePeriodMs: number): Promise<void>;
  /** Stops the guest at once. */
  kill(): Promise<void>;
  /** Asks the guest to reboot (KubeVirt softreboot). */
  softReboot(): Promise<void>;
  /** Sends bytes to the serial console input. */
  writeConsole(data: Uint8Array): void;
  /** The last console output kept for late clients (bounded). */
  consoleScrollback(): Uint8Array;
  stats(): Promise<MachineStats>;
  /** Target side: listen for an incoming migration; resolves with where the source should connect (and, with TLS,
   *  this side's certificate). */
  prepareIncoming(options: IncomingOptions): Promise<MigrationTarget>;
  /** Target side: the source's certificate (PEM), the only one the TLS handshake accepts; again to replace it
   *  until the source connects. Throws when nothing is prepared, or the certificate is unreadable. */
  trustMigrationSource(certificate: string): void;
  /** Source side: live-migrate to `target`. Resolves with the outcome; on failure the guest runs on here. */
  migrateTo(target: MigrationTarget, options: MigrationOptions): Promise<MigrationResult>;
  /** Source side: abort an in-flight migration (the result then has failureReason "canceled"). */
  cancelMigration(): Promise<void>;
  on<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void;
  off<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void;
}
