import { describe, expect, it } from "vitest";
import { vm, vmi } from "../testdata/objects.ts";
import type {
  ValidationCause,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
} from "../types.ts";
import { denialFromCauses, denialFromError, denialToStatus, toWireCauses } from "./causes.ts";
import { admitMigrationCreate, admitMigrationUpdate, validateMigrationPolicy } from "./migration-validation.ts";
import { validateVm } from "./vm-validation.ts";
import { validateVmiCreate, validateVmiUpdate } from "./vmi-validation.ts";

const cause = (type: string, message: string, field: string): ValidationCause => ({ type, message, field });

describe("validateVm(): run strategy, template, name", () => {
  it.each<[string, (v: VirtualMachine) => void, ValidationCause[]]>([
    [
      "running and runStrategy together",
      (v) => {
        v.spec.running = true;
      },
      [
        cause(
          "FieldValueInvalid",
          "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead",
          "spec.running",
        ),
      ],
    ],
    [
      "neither running nor runStrategy",
      (v) => {
        delete v.spec.runStrategy;
      },
      [cause("FieldValueInvalid", "RunStrategy must be specified", "spec.running")],
    ],
    [
      "unknown runStrategy",
      (v) => {
        (v.spec as { runStrategy?: string }).runStrategy = "Sometimes";
      },
      [cause("FieldValueInvalid", "Invalid RunStrategy (Sometimes)", "spec.runStrategy")],
    ],
    [
      "WaitAsReceiver without its feature gate",
      (v) => {
        (v.spec as { runStrategy?: string }).runStrategy = "WaitAsReceiver";
      },
      [cause("FieldValueInvalid", "Invalid RunStrategy (WaitAsReceiver)", "spec.runStrategy")],
    ],
    [
      "no template",
      (v) => {
        (v.spec as { template?: unknown }).template = undefined;
      },
      [cause("FieldValueRequired", "missing virtual machine template.", "spec.template")],
    ],
    [
      "reserved label on the template",
      (v) => {
        if (v.spec.template) v.spec.template.metadata = { labels: { "kubevirt.io/nodeName": "n1" } };
      },
      [
        cause(
          "FieldValueNotSupported",
          "creation of the following reserved kubevirt.io/ labels on a VMI object is prohibited",
          "spec.template.metadata.labels",
        ),
      ],
    ],
    [
      "name not a DNS subdomain",
      (v) => {
        v.metadata = { name: "Bad_Name" };
      },
      [
        cause(
          "FieldValueInvalid",
          `Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
          "metadata.name",
        ),
      ],
    ],
    [
      "template without domain",
      (v) => {
        if (v.spec.template) v.spec.template.spec = undefined;
      },
      [cause("FieldValueRequired", "spec.template.spec.domain is a required field", "spec.template.spec.domain")],
    ],
  ])("%s", (_n, mutate, want) => {
    const v = vm();
    mutate(v);
    expect(validateVm(v)).toEqual(want);
  });

  it("running: false alone is valid (the deprecated spelling of Halted)", () => {
    const v = vm();
    delete v.spec.runStrategy;
    v.spec.running = false;
    expect(validateVm(v)).toEqual([]);
  });

  it("a kubevirt service account may set reserved labels", () => {
    const v = vm();
    if (v.spec.template) v.spec.template.metadata = { labels: { "kubevirt.io/nodeName": "n1" } };
    expect(validateVm(v, { isKubeVirtServiceAccount: true })).toEqual([]);
  });
});

describe("VMI create and update", () => {
  it("a VMI with no memory anywhere is refused on create", () => {
    const v = vmi();
    v.spec.domain.resources = {};
    expect(validateVmiCreate(v)).toEqual([
      cause(
        "FieldValueRequired",
        "no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.pageSize' or 'spec.domain.resources.requests.memory' must be set",
        "",
      ),
    ]);
  });

  it("a VMI without domain.devices is refused", () => {
    const v = vmi();
    (v.spec.domain as { devices?: unknown }).devices = undefined;
    expect(validateVmiCreate(v)).toEqual([
      cause("FieldValueRequired", "spec.domain.devices is a required field", "spec.domain.devices"),
    ]);
  });

  it("users may not change the spec of a VMI", () => {
    const old = vmi();
    const next = structuredClone(old);
    next.spec.hostname = "other";
    expect(validateVmiUpdate(next, old)).toEqual([
      cause("FieldValueNotSupported", "update of VMI object is restricted", ""),
    ]);
    expect(validateVmiUpdate(next, old, { isKubeVirtServiceAccount: true })).toEqual([]);
  });

  it("users may not change reserved labels, but may change their own", () => {
    const old = vmi();
    const next = structuredClone(old);
    next.metadata = { ...next.metadata, labels: { mine: "yes" } };
    expect(validateVmiUpdate(next, old)).toEqual([]);
    next.metadata.labels = { "kubevirt.io/nodeName": "n2" };
    expect(validateVmiUpdate(next, old)).toEqual([
      cause(
        "FieldValueNotSupported",
        "modification of the following reserved kubevirt.io/ labels on a VMI object is prohibited",
        "metadata.labels",
      ),
    ]);
  });

  it("causes go on the wire with the type under `reason`, inside a Status", () => {
    const causes = [cause("FieldValueInvalid", "bad", "spec.x"), cause("FieldValueRequired", "no memory", "")];
    expect(toWireCauses(causes)).toEqual([
      { reason: "FieldValueInvalid", message: "bad", field: "spec.x" },
      { reason: "FieldValueRequired", message: "no memory" },
    ]);
    expect(denialToStatus(denialFromCauses(causes))).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "bad, no memory",
      reason: "Invalid",
      code: 422,
      details: { causes: toWireCauses(causes) },
    });
    expect(denialToStatus(denialFromError("nope"))).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "nope",
      reason: "BadRequest",
      code: 400,
    });
  });

  it("denialFromCauses joins ten messages and counts the rest, as KubeVirt's ToAdmissionResponse", () => {
    const causes = Array.from({ length: 12 }, (_, i) => cause("FieldValueInvalid", `m${i}`, `f${i}`));
    const d = denialFromCauses(causes);
    expect(d.code).toBe(422);
    expect(d.causes).toHaveLength(10);
    expect(d.message).toBe("m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, and 2 more validation errors");
  });
});

describe("VMIM admission", () => {
  const mig = (name: string, phase?: string, uid = name): VirtualMachineInstanceMigration => ({
    metadata: { name, namespace: "default", uid },
    spec: { vmiName: "testvmi" },
    ...(phase ? { status: { phase: phase as "Running" } } : {}),
  });
  const running = (): VirtualMachineInstance => ({ ...vmi(), status: { phase: "Running" } });

  it.each<
    [
      string,
      VirtualMachineInstanceMigration,
      Parameters<typeof admitMigrationCreate>[1],
      { code: number; message: string },
    ]
  >([
    [
      "missing vmiName",
      { metadata: { name: "m" }, spec: {} },
      { vmi: running(), migrationsOfVmi: [] },
      { code: 422, message: "vmiName is missing" },
    ],
    [
      "missing VMI",
      mig("m"),
      { vmi: undefined, migrationsOfVmi: [] },
      { code: 400, message: 'the VMI "default/testvmi" does not exist' },
    ],
    [
      "final VMI",
      mig("m"),
      { vmi: { ...vmi(), status: { phase: "Succeeded" } }, migrationsOfVmi: [] },
      { code: 400, message: "Cannot migrate VMI in finalized state." },
    ],
    [
      "non-migratable VMI",
      mig("m"),
      {
        vmi: {
          ...vmi(),
          status: {
            phase: "Running",
            conditions: [
              {
                type: "LiveMigratable",
                status: "False",
                reason: "DisksNotLiveMigratable",
                message: "PVC x is not shared",
              },
            ],
          },
        },
        migrationsOfVmi: [],
      },
      { code: 400, message: "Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: PVC x is not shared" },
    ],
    [
      "another migration in flight",
      mig("m2"),
      { vmi: running(), migrationsOfVmi: [mig("m1", "Running", "uid-1"), mig("m0", "Succeeded")] },
      {
        code: 400,
        message:
          "in-flight migration detected. Active migration job (uid-1) is currently already in progress for VMI testvmi.",
      },
    ],
    [
      "priority set by a user",
      { ...mig("m"), spec: { vmiName: "testvmi", priority: "system-critical" } },
      { vmi: running(), migrationsOfVmi: [] },
      { code: 422, message: "Migration priority queue, only virt-controller is allowed to set priority field" },
    ],
  ])("refuses: %s", (_n, m, ctx, want) => {
    const d = admitMigrationCreate(m, ctx);
    expect(d && { code: d.code, message: d.message }).toEqual(want);
  });

  it("admits a migration of a running VMI when earlier ones are final", () => {
    expect(
      admitMigrationCreate(mig("m2"), {
        vmi: running(),
        migrationsOfVmi: [mig("m1", "Failed"), mig("m0", "Succeeded")],
      }),
    ).toBeUndefined();
  });

  it("refuses spec changes and selector-label removal while in flight", () => {
    const old = { ...mig("m", "Running"), metadata: { name: "m", labels: { "kubevirt.io/vmi-name": "testvmi" } } };
    expect(admitMigrationUpdate({ ...old, spec: { vmiName: "other" } }, old)?.message).toBe(
      "update of Migration object's spec is restricted",
    );
    expect(admitMigrationUpdate({ ...old, metadata: { name: "m", labels: {} } }, old)?.message).toBe(
      "selector label can't be removed from an in-flight migration",
    );
    expect(
      admitMigrationUpdate({ ...old, metadata: { name: "m", labels: { "kubevirt.io/vmi-name": "x" } } }, old)?.message,
    ).toBe("selector label can't be modified on an in-flight migration");
    expect(admitMigrationUpdate(structuredClone(old), old)).toBeUndefined();
  });
});

describe("MigrationPolicy validation", () => {
  const base = { metadata: { name: "p" }, spec: { selectors: { virtualMachineInstanceSelector: { tier: "db" } } } };
  it.each<[string, Record<string, unknown>, ValidationCause[]]>([
    ["valid", {}, []],
    [
      "negative completion timeout",
      { completionTimeoutPerGiB: -1 },
      [cause("FieldValueInvalid", "must not be negative", "spec.completionTimeoutPerGiB")],
    ],
    [
      "negative bandwidth",
      { bandwidthPerMigration: "-1Mi" },
      [cause("FieldValueInvalid", "must not be negative", "spec.bandwidthPerMigration")],
    ],
    [
      "bandwidth not a quantity",
      { bandwidthPerMigration: "fast" },
      [
        cause(
          "FieldValueInvalid",
          "spec.bandwidthPerMigration 'fast': quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
          "spec.bandwidthPerMigration",
        ),
      ],
    ],
    [
      "downtime 0",
      { maxDowntimeMs: 0 },
      [cause("FieldValueInvalid", "must be between 1 and 2000000", "spec.maxDowntimeMs")],
    ],
    [
      "downtime too large",
      { maxDowntimeMs: 2_000_001 },
      [cause("FieldValueInvalid", "must be between 1 and 2000000", "spec.maxDowntimeMs")],
    ],
  ])("%s", (_n, extra, want) => {
    expect(validateMigrationPolicy({ ...base, spec: { ...base.spec, ...extra } })).toEqual(want);
  });
});
