/**
 * Loads the compiled addon. Only libs/vmm may import this package (STYLE.md §2); it declares the binding's
 * shape in its own `native.ts`. Build first with `npm run build -w @kvt/native` (Nx does it for tests).
 */
import { createRequire } from "node:module";

/** Absolute path of the compiled addon. */
export const addonPath: string = new URL("./build/kvm_native.node", import.meta.url).pathname;

/**
 * Absolute path of the test guest: a freestanding PVH-bootable ELF (QEMU `-kernel` boots it unchanged) that the
 * VMM loads too. Built with the addon by `npm run build -w @kvt/native`. Parameters: see native/guest/workload.c.
 */
export const testGuestPath: string = new URL("./build/guest/kvt-test-guest.elf", import.meta.url).pathname;

/** Loads the addon (cached by the runtime's module loader). Throws when it has not been built. */
export function loadAddon(): unknown {
  return createRequire(import.meta.url)(addonPath);
}
