/** Manifests the e2e tests create: test-guest VMs (native VMM) and the seed's demo VM (emulated here). */
import { readFileSync } from "node:fs";
import { parse } from "yaml";

/** A VirtualMachine running the deterministic test guest (`local/test-guest:latest`) on the native VMM. */
export function testGuestVm(
  name: string,
  options: {
    running?: boolean;
    runStrategy?: string;
    memory?: string;
    /** Extra labels on the VMI template (a MigrationPolicy selects VMIs by them). */
    labels?: Record<string, string>;
    /** Default 0: the test guest has no ACPI, so a graceful shutdown always waits out the whole grace period. */
    terminationGracePeriodSeconds?: number;
  } = {},
): Record<string, unknown> {
  const run = options.runStrategy ? { runStrategy: options.runStrategy } : { running: options.running ?? false };
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name, labels: { "kubevirt.io/vm": name } },
    spec: {
      ...run,
      template: {
        metadata: { labels: { "kubevirt.io/vm": name, ...options.labels } },
        spec: {
          domain: {
            devices: { disks: [{ name: "containerdisk", disk: { bus: "virtio" } }] },
            resources: { requests: { memory: options.memory ?? "64Mi" } },
          },
          terminationGracePeriodSeconds: options.terminationGracePeriodSeconds ?? 0,
          volumes: [{ name: "containerdisk", containerDisk: { image: "local/test-guest:latest" } }],
        },
      },
    },
  };
}

/** The seed's vm-cirros manifest as `npm start` uses it (containerDisk local/demo-linux:latest), as YAML text. */
export function demoVmYaml(): string {
  return readFileSync(new URL("../../tools/local-cluster/manifests/vm-cirros.yaml", import.meta.url), "utf8");
}

/** The seed's vm-cirros manifest as an object. */
export function demoVm(): Record<string, unknown> {
  return parse(demoVmYaml()) as Record<string, unknown>;
}
