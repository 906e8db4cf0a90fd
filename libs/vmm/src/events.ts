/**
 * The events a VM emits (kubernetes-fluent-client's typed `WatchEvent` style): subscribe with `vm.on(name, fn)`.
 *
 *   serial-output  a batch of bytes the guest wrote to its UART (batched: as many as arrived since the last event)
 *   vcpu-exit      a vCPU exit the VMM does not handle; fatal ones stop the guest (a "shutdown" follows)
 *   shutdown       the guest stopped by itself: "guest-exit" (test port, code = value written), "reset" (i8042),
 *                  "triple-fault", "fatal-exit"
 *   device-error   a device stopped because the guest broke its protocol (a bad virtqueue chain or request): it
 *                  reads NEEDS_RESET until the guest's driver resets it; the machine and the other devices run on
 */

/** Why a guest stopped by itself. */
export type ShutdownReason = "guest-exit" | "reset" | "triple-fault" | "fatal-exit";

/** Payload of "vcpu-exit". */
export interface VcpuExitEvent {
  readonly vcpu: number;
  /** e.g. "KVM_EXIT_MMIO write 0xfee00000 len 4", "KVM_EXIT_INTERNAL_ERROR suberror 1". */
  readonly reason: string;
  readonly fatal: boolean;
}

/** Payload of "shutdown". */
export interface ShutdownEvent {
  readonly reason: ShutdownReason;
  /** The value the guest wrote to the test port (guest-exit), else an exit-specific code. */
  readonly code: number;
}

/** Payload of "device-error". */
export interface DeviceErrorEvent {
  /** Which device, e.g. "virtio-blk 00:01.0" (disk 0). */
  readonly device: string;
  /** Why it stopped, e.g. "loop" (a descriptor chain that loops). */
  readonly reason: string;
}

/** Event name -> listener. */
export interface VmEvents {
  "serial-output": (chunk: Uint8Array) => void;
  "vcpu-exit": (event: VcpuExitEvent) => void;
  shutdown: (event: ShutdownEvent) => void;
  "device-error": (event: DeviceErrorEvent) => void;
}

/** A minimal typed emitter (no dependency on node:events, same behaviour on Node and Deno). */
export class TypedEmitter<E extends { [K in keyof E]: (arg: never) => void }> {
  readonly #listeners = new Map<keyof E, Set<E[keyof E]>>();

  /** Adds a listener. */
  on<K extends keyof E>(event: K, listener: E[K]): this {
    let set = this.#listeners.get(event);
    if (!set) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener);
    return this;
  }

  /** Removes a listener. */
  off<K extends keyof E>(event: K, listener: E[K]): this {
    this.#listeners.get(event)?.delete(listener);
    return this;
  }

  /** Calls every listener of `event` with `arg`, in subscription order. */
  protected emit<K extends keyof E>(event: K, arg: Parameters<E[K]>[0]): void {
    const set = this.#listeners.get(event);
    if (!set) return;
    for (const listener of [...set]) (listener as (a: Parameters<E[K]>[0]) => void)(arg);
  }
}

/**
 * Splits a byte stream into text lines (UTF-8, "\n"-terminated, "\r" dropped). Feed it serial-output chunks.
 */
export class LineSplitter {
  #pending = "";
  readonly #decoder = new TextDecoder();

  /** Returns the complete lines in `chunk` (plus what was pending). */
  push(chunk: Uint8Array): string[] {
    this.#pending += this.#decoder.decode(chunk, { stream: true });
    const parts = this.#pending.split("\n");
    this.#pending = parts.pop() ?? "";
    return parts.map((l) => l.replace(/\r$/, ""));
  }

  /** The incomplete last line, if any. */
  get pending(): string {
    return this.#pending;
  }
}
