import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { EventRecorder } from "./event-recorder.ts";
import type { CoreEvent } from "./types.ts";

describe("EventRecorder", () => {
  it("creates an Event about the object, and bumps count on a repeat", async () => {
    const created: CoreEvent[] = [];
    const patched: unknown[] = [];
    const rec = new EventRecorder({
      component: "virtualmachine-controller",
      logger: pino({ level: "silent" }),
      events: {
        create: async (e) => {
          created.push(e);
          return e;
        },
        mergePatch: async (_ns, name, p) => {
          patched.push({ name, p });
          return created[0];
        },
      },
    });
    const vm = {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachine",
      metadata: { name: "vm1", namespace: "d", uid: "u1" },
    };
    rec.event(
      vm,
      "Normal",
      "SuccessfulCreate",
      "Started the virtual machine by creating the new virtual machine instance vm1",
    );
    await rec.flush();
    rec.event(
      vm,
      "Normal",
      "SuccessfulCreate",
      "Started the virtual machine by creating the new virtual machine instance vm1",
    );
    await rec.flush();
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({
      metadata: { namespace: "d" },
      involvedObject: { kind: "VirtualMachine", name: "vm1", uid: "u1", namespace: "d" },
      reason: "SuccessfulCreate",
      type: "Normal",
      source: { component: "virtualmachine-controller" },
    });
    expect(patched).toEqual([{ name: created[0].metadata!.name, p: expect.objectContaining({ count: 2 }) }]);
  });

  it("never throws when the write fails", async () => {
    const rec = new EventRecorder({
      component: "c",
      logger: pino({ level: "silent" }),
      events: {
        create: async () => {
          throw new Error("down");
        },
        mergePatch: async () => {
          throw new Error("down");
        },
      },
    });
    rec.event({ metadata: { name: "x" } }, "Warning", "FailedCreate", "m");
    await expect(rec.flush()).resolves.toBeUndefined();
  });

  it("names events of two recorders about objects of one name apart (a VM and its VMI)", async () => {
    const names = new Set<string>();
    const recorder = () =>
      new EventRecorder({
        component: "c",
        logger: pino({ level: "silent" }),
        events: {
          create: async (e) => {
            names.add(e.metadata?.name ?? "");
            return e;
          },
          mergePatch: async () => ({}) as CoreEvent,
        },
      });
    const [vms, vmis] = [recorder(), recorder()];
    for (let i = 0; i < 50; i++) {
      vms.event(
        { kind: "VirtualMachine", metadata: { name: "vm1", namespace: "d", uid: "a" } },
        "Normal",
        "R",
        `m${i}`,
      );
      vmis.event(
        { kind: "VirtualMachineInstance", metadata: { name: "vm1", namespace: "d", uid: "b" } },
        "Normal",
        "R",
        `m${i}`,
      );
    }
    await Promise.all([vms.flush(), vmis.flush()]);
    expect(names.size).toBe(100);
  });
});
