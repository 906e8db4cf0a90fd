import type { HostVirt } from "@kvt/vmm";
import { describe, expect, it } from "vitest";
import { chooseBackend, emulationCondition, parseUseEmulation, type UseEmulation } from "./backend-choice.ts";

const hardware: HostVirt = { kvmDevice: true, hardwareVirt: true, pvm: false };
const pvm: HostVirt = { kvmDevice: true, hardwareVirt: false, pvm: true };
const nestedNoFlag: HostVirt = { kvmDevice: true, hardwareVirt: false, pvm: false };
const noKvm: HostVirt = { kvmDevice: false, hardwareVirt: false, pvm: false };

describe("chooseBackend()", () => {
  it.each<[UseEmulation, HostVirt, boolean, string, string | undefined]>([
    ["whenNeeded", hardware, false, "native", undefined],
    ["whenNeeded", nestedNoFlag, false, "native", undefined],
    ["whenNeeded", pvm, true, "native", undefined],
    ["whenNeeded", pvm, false, "qemu", "KVMCannotRunGuest"],
    ["whenNeeded", noKvm, true, "qemu", "KVMUnavailable"],
    ["never", hardware, false, "native", undefined],
    ["never", pvm, true, "native", undefined],
    ["always", hardware, false, "qemu", "EmulationRequested"],
    ["always", pvm, true, "qemu", "EmulationRequested"],
  ])("%s on %o, pvmSafe=%s -> %s (%s)", (setting, host, pvmSafe, backend, reason) => {
    const c = chooseBackend(setting, host, { pvmSafe });
    expect(c.ok).toBe(true);
    if (!c.ok) return;
    expect(c.backend).toBe(backend);
    expect(c.emulation?.reason).toBe(reason);
  });

  it.each<[HostVirt, RegExp]>([
    [pvm, /PVM.*not PVM-safe.*never/],
    [noKvm, /\/dev\/kvm does not exist.*never/],
  ])("fails a guest that cannot run anywhere (useEmulation never, %o)", (host, message) => {
    const c = chooseBackend("never", host, { pvmSafe: false });
    expect(c).toMatchObject({ ok: false, reason: "NoVirtualizationAvailable" });
    if (!c.ok) expect(c.message).toMatch(message);
  });
});

describe("chooseBackend() for a device only QEMU has", () => {
  const needsQemu = "disk cd (bus sata) needs a device only QEMU provides";
  it("runs the VMI on QEMU with the device as the reason, even on hardware KVM", () => {
    const c = chooseBackend("whenNeeded", hardware, { pvmSafe: true, needsQemu });
    expect(c).toMatchObject({ ok: true, backend: "qemu", emulation: { reason: "DeviceNeedsEmulation" } });
    if (c.ok) expect(c.emulation?.message).toContain(needsQemu);
  });

  it("fails it with the device named when emulation is never allowed", () => {
    const c = chooseBackend("never", hardware, { pvmSafe: true, needsQemu });
    expect(c).toMatchObject({ ok: false, reason: "NoVirtualizationAvailable" });
    if (!c.ok) expect(c.message).toBe(`${needsQemu}, and useEmulation is never: the VMI cannot run here`);
  });
});

describe("emulationCondition()", () => {
  it("is SoftwareEmulation=True with the reason for an emulated VMI, and absent otherwise", () => {
    expect(emulationCondition(chooseBackend("whenNeeded", pvm, { pvmSafe: false }))).toEqual({
      type: "SoftwareEmulation",
      status: "True",
      reason: "KVMCannotRunGuest",
      message: expect.stringMatching(/PVM/),
    });
    expect(emulationCondition(chooseBackend("whenNeeded", hardware, { pvmSafe: false }))).toBeUndefined();
    expect(emulationCondition(chooseBackend("never", pvm, { pvmSafe: false }))).toBeUndefined();
  });
});

describe("parseUseEmulation()", () => {
  it.each([
    [undefined, "whenNeeded"],
    [true, "whenNeeded"],
    [false, "never"],
    ["always", "always"],
    ["never", "never"],
  ])("%j -> %s", (value, want) => {
    expect(parseUseEmulation(value)).toBe(want);
  });
  it("rejects anything else", () => {
    expect(() => parseUseEmulation("sometimes")).toThrow(/invalid useEmulation/);
  });
});
