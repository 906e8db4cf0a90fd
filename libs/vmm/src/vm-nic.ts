/**
 * NICs of a Linux boot (`boot.nics`): virtio-net devices on the guest's PCI bus after the disks (NIC j at
 * 00:(disks + j + 1).0), each backed by a tap on the host (native/src/devices/virtio/net.h). Validated here; the
 * native constructor gets `[tap, mac]` pairs that are already valid, the MAC as 6 bytes.
 *
 *   boot.nics[j] { tap, mac } --parseVmNics--> mac normalised (lower case) --nativeNics--> [tap, Uint8Array(6)]
 *   --> new NativeVm(..., linuxPlatform, disks, nics)
 *   host: the tap (attached if it exists, else created for the VM's lifetime; needs CAP_NET_ADMIN); with `vhost`
 *         "auto" or "on" the kernel's vhost-net moves the frames between the tap and the guest's rings
 *         (native/src/devices/virtio/vhost_net.h), as QEMU's `vhost=on` does
 *   guest: eth<j> with that MAC, link up (VIRTIO_NET_F_STATUS); frames pass unchanged between the two
 */

/** One virtio-net NIC. */
export interface VmNic {
  /**
   * The host tap device: an existing tap (e.g. made by `ip tuntap add mode tap`, as KubeVirt's virt-handler
   * pre-creates one) is attached; otherwise the kernel creates it and removes it when the VM stops.
   */
  readonly tap: string;
  /** The guest's MAC address: six hex octets separated by ":" (e.g. "52:54:00:12:34:56"), unicast, not all zero. */
  readonly mac: string;
  /**
   * The data path: "off" (the VMM's own worker thread), "auto" (the kernel's vhost-net where /dev/vhost-net opens
   * and takes the driver's ring features, the worker otherwise; the default) or "on" (vhost-net, or the NIC fails
   * to start). A live migration runs the worker path while it tracks dirty pages either way.
   */
  readonly vhost?: VhostMode;
}

/** How a NIC moves its frames (VmNic.vhost). */
export type VhostMode = "off" | "auto" | "on";
const VHOST_MODES: readonly VhostMode[] = ["off", "auto", "on"];

/** Most disks plus NICs one VM takes (the native machine's PCI slots 1..16). */
export const MAX_VM_PCI_DEVICES = 16;
/** Longest tap name: Linux's IFNAMSIZ is 16 with the terminating NUL. */
export const MAX_TAP_NAME_BYTES = 15;

/** A NIC as the native constructor takes it. */
export type NativeNic = [tap: string, mac: Uint8Array, vhost: number];

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;
// Linux refuses "", ".", "..", and names with "/", ":" or whitespace (dev_valid_name).
const TAP_NAME = /^[^\s/:]+$/;

/** Parses "52:54:00:12:34:56" into 6 bytes (RangeError naming `label` when it is not a unicast MAC). */
export function parseMac(mac: string, label = "mac"): Uint8Array {
  if (!MAC.test(mac)) throw new RangeError(`${label} must be six hex octets like 52:54:00:12:34:56, got "${mac}"`);
  const bytes = Uint8Array.from(mac.split(":").map((o) => Number.parseInt(o, 16)));
  if (((bytes[0] ?? 0) & 1) !== 0) throw new RangeError(`${label} must be a unicast address, got multicast "${mac}"`);
  if (bytes.every((b) => b === 0)) throw new RangeError(`${label} must not be all zero`);
  return bytes;
}

/**
 * Validates `boot.nics` (TypeError for a wrong type, RangeError for a value out of range) and returns them with the
 * MAC in lower case. `disks` counts against the PCI slots they share.
 */
export function parseVmNics(nics: unknown, disks = 0, label = "boot.nics"): Required<VmNic>[] {
  if (!Array.isArray(nics)) throw new TypeError(`${label} must be an array`);
  if (disks + nics.length > MAX_VM_PCI_DEVICES) {
    throw new RangeError(
      `${label} and boot.disks must be at most ${MAX_VM_PCI_DEVICES} devices together, got ${disks + nics.length}`,
    );
  }
  const taps = new Set<string>();
  return nics.map((nic: unknown, j): Required<VmNic> => {
    const name = `${label}[${j}]`;
    if (typeof nic !== "object" || nic === null) throw new TypeError(`${name} must be an object`);
    const { tap, mac, vhost = "auto" } = nic as Partial<Record<keyof VmNic, unknown>>;
    if (typeof tap !== "string" || tap === "") throw new TypeError(`${name}.tap must be a non-empty string`);
    if (typeof mac !== "string") throw new TypeError(`${name}.mac must be a string`);
    if (new TextEncoder().encode(tap).length > MAX_TAP_NAME_BYTES) {
      throw new RangeError(`${name}.tap must be at most ${MAX_TAP_NAME_BYTES} bytes, got "${tap}"`);
    }
    if (!TAP_NAME.test(tap) || tap === "." || tap === "..") {
      throw new RangeError(`${name}.tap is not a valid interface name: "${tap}"`);
    }
    if (taps.has(tap)) throw new RangeError(`${name}.tap "${tap}" is used by another NIC`);
    taps.add(tap);
    parseMac(mac, `${name}.mac`);
    if (!VHOST_MODES.includes(vhost as VhostMode)) {
      throw new RangeError(`${name}.vhost must be one of ${VHOST_MODES.join(", ")}, got ${JSON.stringify(vhost)}`);
    }
    return { tap, mac: mac.toLowerCase(), vhost: vhost as VhostMode };
  });
}

/** Parsed NICs as the native constructor takes them. */
export function nativeNics(nics: readonly VmNic[]): NativeNic[] {
  return nics.map((n) => [n.tap, parseMac(n.mac), VHOST_MODES.indexOf(n.vhost ?? "auto")]);
}
