/**
 * Validation rules where this platform once answered differently from KubeVirt, each named by KubeVirt's function,
 * checked through virt-api's VM and VMI admitters as a manifest reaches them.
 */
import type { KubeVirtConfiguration } from "@kvt/api";
import { describe, expect, it } from "vitest";
import type { KubeVirtConfigSource } from "../kube/kubevirt-config.ts";
import type { AdmissionRequest, AdmitResult } from "./admission.ts";
import { validateVm, validateVmiCreate } from "./admitters.ts";

const source = (configuration?: KubeVirtConfiguration): KubeVirtConfigSource => ({
  configuration: () => Promise.resolve(configuration),
});

const request = (kind: string, object: Record<string, unknown>): AdmissionRequest => ({
  uid: "u1",
  kind: { group: "kubevirt.io", version: "v1", kind },
  resource: { group: "kubevirt.io", version: "v1", resource: `${kind.toLowerCase()}s` },
  operation: "CREATE",
  namespace: "default",
  name: String((object.metadata as { name?: string } | undefined)?.name),
  object,
});

/** KubeVirt's examples/vm-cirros-sata.yaml (image aside): volumes without disks, `devices: {}`. */
const vmCirrosSata = {
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachine",
  metadata: { labels: { "kubevirt.io/vm": "vm-cirros-sata" }, name: "vm-cirros-sata" },
  spec: {
    runStrategy: "Halted",
    template: {
      metadata: { labels: { "kubevirt.io/vm": "vm-cirros-sata" } },
      spec: {
        domain: { devices: {}, memory: { guest: "128Mi" }, resources: {} },
        terminationGracePeriodSeconds: 0,
        volumes: [
          { containerDisk: { image: "local/demo-linux:latest" }, name: "containerdisk" },
          {
            cloudInitNoCloud: { userData: "#!/bin/sh\n\necho 'printed from cloud-init userdata'\n" },
            name: "cloudinitdisk",
          },
        ],
      },
    },
  },
};

const vmi = (spec: Record<string, unknown>) => ({
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachineInstance",
  metadata: { name: "v1" },
  spec: {
    domain: { resources: { requests: { memory: "128Mi" } }, devices: { disks: [{ name: "root", disk: {} }] } },
    volumes: [{ name: "root", containerDisk: { image: "local/test-guest:latest" } }],
    ...spec,
  },
});

const causes = (r: AdmitResult) => (r.allowed ? [] : (r.causes ?? []));

describe("KubeVirt's validation rules at virt-api admission", () => {
  it("SetDefaultVolumeDisk before validation: vm-cirros-sata (volumes without disks) is accepted", async () => {
    expect(await validateVm("kubevirt", undefined, source())(request("VirtualMachine", vmCirrosSata))).toEqual({
      allowed: true,
    });
  });

  it.each<[string, Record<string, unknown>, KubeVirtConfiguration | undefined, unknown[]]>([
    [
      "validateGuestMemoryLimit: memory.guest above the limit, vmRolloutStrategy Stage",
      {
        domain: {
          memory: { guest: "256Mi" },
          resources: { requests: { memory: "128Mi" }, limits: { memory: "128Mi" } },
          devices: { disks: [{ name: "root", disk: {} }] },
        },
      },
      { vmRolloutStrategy: "Stage" },
      [
        {
          reason: "FieldValueInvalid",
          message:
            "spec.domain.memory.guest '256Mi' must be equal to or less than the memory limit spec.domain.resources.limits.memory '128Mi'",
          field: "spec.domain.memory.guest",
        },
      ],
    ],
    [
      "validateGuestMemoryLimit: skipped under LiveUpdate (KubeVirt's default rollout strategy)",
      {
        domain: {
          memory: { guest: "256Mi" },
          resources: { requests: { memory: "128Mi" }, limits: { memory: "128Mi" } },
          devices: { disks: [{ name: "root", disk: {} }] },
        },
      },
      undefined,
      [],
    ],
    [
      "validatePodDNSConfig: dnsPolicy None without dnsConfig",
      { dnsPolicy: "None" },
      undefined,
      [
        {
          reason: "FieldValueRequired",
          message: "must provide `dnsConfig` when `dnsPolicy` is None",
          field: "spec.dnsConfig",
        },
      ],
    ],
    [
      "validatePodDNSConfig: dnsPolicy None with an empty nameserver list",
      { dnsPolicy: "None", dnsConfig: { searches: ["example.com"] } },
      undefined,
      [
        {
          reason: "FieldValueRequired",
          message: "must provide at least one DNS nameserver when `dnsPolicy` is None",
          field: "nameservers",
        },
      ],
    ],
    [
      "validatePodDNSConfig: dnsPolicy None with a nameserver",
      { dnsPolicy: "None", dnsConfig: { nameservers: ["10.0.0.10"] } },
      undefined,
      [],
    ],
    [
      "validatePodDNSConfig: too many nameservers, one not an IP",
      { dnsConfig: { nameservers: ["1.1.1.1", "8.8.8.8", "9.9.9.9", "dns.example"] } },
      undefined,
      [
        {
          reason: "FieldValueInvalid",
          message: "must not have more than 3 nameservers: [1.1.1.1 8.8.8.8 9.9.9.9 dns.example]",
          field: "nameservers",
        },
        { reason: "FieldValueInvalid", message: "must be valid IP address: dns.example", field: "nameservers" },
      ],
    ],
    [
      "validateDNSPolicy: an unknown policy",
      { dnsPolicy: "Sometimes" },
      undefined,
      [
        {
          reason: "FieldValueNotSupported",
          message:
            "DNSPolicy: Sometimes is not supported, valid values: [ClusterFirstWithHostNet ClusterFirst Default None ]",
          field: "spec.dnsPolicy",
        },
      ],
    ],
  ])("%s", async (_, spec, configuration, expected) => {
    const result = await validateVmiCreate(
      "kubevirt",
      source(configuration),
    )(request("VirtualMachineInstance", vmi(spec)));
    expect(causes(result)).toEqual(expected);
  });
});
