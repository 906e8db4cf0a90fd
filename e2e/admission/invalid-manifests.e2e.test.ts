/**
 * Invalid manifests are refused through kubectl with field-precise messages, and nothing is stored: the API server's
 * schema validation and virt-api's validating webhooks, as on a real cluster.
 */
import { describe, expect, inject, it } from "vitest";
import { kubectl } from "../lib/cli.ts";
import { testGuestVm } from "../lib/manifests.ts";

type Obj = Record<string, unknown>;
function vm(
  name: string,
  edit: (spec: Obj, template: Obj, domain: Obj) => void,
  base: Obj = testGuestVm(name, { running: false }),
): Obj {
  const copy = structuredClone(base) as { spec: Obj & { template: { spec: Obj & { domain: Obj } } } };
  edit(copy.spec, copy.spec.template.spec, copy.spec.template.spec.domain);
  return copy;
}

const CASES: [string, Obj, RegExp][] = [
  ["running and runStrategy together", vm("bad-1", (s) => (s.runStrategy = "Always")), /spec\.running/],
  ["neither running nor runStrategy", vm("bad-2", (s) => delete s.running), /spec\.runStrategy|spec\.running/],
  [
    "an unknown runStrategy",
    vm("bad-3", (s) => {
      delete s.running;
      s.runStrategy = "Sometimes";
    }),
    /spec\.runStrategy/,
  ],
  [
    "a disk naming a missing volume",
    vm("bad-5", (_s, _t, d) => ((d.devices as Obj).disks = [{ name: "nope", disk: { bus: "virtio" } }])),
    /spec\.template\.spec\.domain\.devices\.disks\[0\]\.name/,
  ],
  [
    "two disks with one name",
    vm(
      "bad-6",
      (_s, _t, d) =>
        ((d.devices as Obj).disks = [
          { name: "containerdisk", disk: {} },
          { name: "containerdisk", disk: {} },
        ]),
    ),
    /spec\.template\.spec\.domain\.devices\.disks\[1\]\.name/,
  ],
  [
    "two volumes with one name",
    vm("bad-7", (_s, t) => (t.volumes = [...(t.volumes as Obj[]), ...(t.volumes as Obj[])])),
    /spec\.template\.spec\.volumes\[1\]\.name/,
  ],
  [
    "an unknown disk bus",
    vm("bad-8", (_s, _t, d) => ((d.devices as Obj).disks = [{ name: "containerdisk", disk: { bus: "floppy" } }])),
    /spec\.template\.spec\.domain\.devices\.disks\[0\]\.disk\.bus/,
  ],
  [
    "memory that is not a quantity",
    vm("bad-9", (_s, _t, d) => (d.resources = { requests: { memory: "lots" } })),
    /spec\.template\.spec\.domain\.resources\.requests\.memory/,
  ],
  ["an unknown field", vm("bad-10", (_s, _t, d) => (d.bogus = true)), /spec\.template\.spec\.domain\.bogus/],
  [
    "a volume with no source",
    vm("bad-11", (_s, t) => (t.volumes = [{ name: "containerdisk" }])),
    /spec\.template\.spec\.volumes\[0\]/,
  ],
  [
    "an interface naming a missing network",
    vm("bad-12", (_s, _t, d) => ((d.devices as Obj).interfaces = [{ name: "eth9", masquerade: {} }])),
    /spec\.template\.spec\.domain\.devices\.interfaces\[0\]\.name/,
  ],
  [
    "an unknown evictionStrategy",
    vm("bad-13", (_s, t) => (t.evictionStrategy = "Sometimes")),
    /spec\.template\.spec\.evictionStrategy/,
  ],
  [
    "an unknown startStrategy",
    vm("bad-14", (_s, t) => (t.startStrategy = "Later")),
    /spec\.template\.spec\.startStrategy/,
  ],
  [
    "cloud-init user data that is not base64",
    vm(
      "bad-15",
      (_s, t) =>
        (t.volumes = [
          ...(t.volumes as Obj[]),
          { name: "cloudinitdisk", cloudInitNoCloud: { userDataBase64: "%%%not-base64%%%" } },
        ]),
    ),
    /cloudInitNoCloud\.userDataBase64|spec\.template\.spec\.domain\.devices\.disks/,
  ],
  [
    "a negative termination grace period",
    vm("bad-17", (_s, t) => (t.terminationGracePeriodSeconds = -5)),
    /spec\.template\.spec\.terminationGracePeriodSeconds/,
  ],
  [
    "runStrategy of the wrong type",
    vm("bad-19", (s) => {
      delete s.running;
      s.runStrategy = 7;
    }),
    /spec\.runStrategy/,
  ],
  ["a name that is not a DNS-1123 subdomain", vm("Bad_Name", () => {}), /metadata\.name|Bad_Name/],
  [
    "a memory request above its limit",
    vm("bad-22", (_s, _t, d) => (d.resources = { requests: { memory: "2Gi" }, limits: { memory: "1Gi" } })),
    /spec\.template\.spec\.domain\.resources\.requests\.memory/,
  ],
  [
    "a migration with an unknown field",
    {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstanceMigration",
      metadata: { name: "bad-23" },
      spec: { vmiName: "x", speed: "fast" },
    },
    /spec\.speed/,
  ],
  [
    "a migration without vmiName",
    { apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstanceMigration", metadata: { name: "bad-20" }, spec: {} },
    /spec\.vmiName/,
  ],
  [
    "a migration of a VMI that does not exist",
    {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstanceMigration",
      metadata: { name: "bad-21" },
      spec: { vmiName: "no-such-vmi" },
    },
    /no-such-vmi|spec\.vmiName/,
  ],
];

describe("invalid manifests through kubectl", () => {
  const kubeconfig = inject("kubeconfig");

  it.each(CASES)("refuses %s with the field named, and stores nothing", async (_name, manifest, field) => {
    const r = await kubectl(kubeconfig, ["create", "-f", "-"], JSON.stringify(manifest));
    expect(r.code, r.stdout).not.toBe(0);
    expect(r.stderr).toMatch(field);
    const kind = (manifest.kind as string).toLowerCase();
    const name = (manifest.metadata as Obj).name as string;
    const get = await kubectl(kubeconfig, ["get", kind, name]);
    expect(get.code).not.toBe(0);
    expect(get.stderr).toMatch(/NotFound|not found/);
  });
});
