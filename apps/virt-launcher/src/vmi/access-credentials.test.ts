/** accessCredentials' SSH keys in the cloud-init meta-data (KubeVirt's resolveSSHPublicKeys + noCloud/configDrive). */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { afterAll, describe, expect, it } from "vitest";
import { accessCredentialKeys, type DiskCause, planDisks } from "./disks.ts";
import { imageStoreResolver } from "./image-store.ts";

const root = mkdtempSync(join(tmpdir(), "kvt-access-cred-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// The Secret as the kubelet mounts it: a file per key, plus its atomic-writer entries (skipped).
const secretDir = join(root, "secrets", "my-keys-access-cred");
mkdirSync(join(secretDir, "..2026_01_01"), { recursive: true });
writeFileSync(join(secretDir, "b-key"), "ssh-rsa AAAAB3 second@x\n");
writeFileSync(join(secretDir, "a-key"), "ssh-ed25519 AAAAC3 first@x\n");
writeFileSync(join(secretDir, "empty"), "");
const mounts = [{ mountPath: "/var/run/kubevirt-private/secret/my-keys-access-cred", hostPath: secretDir }];

function vmi(method: "noCloud" | "configDrive", volume: Record<string, unknown>): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "vm", namespace: "ns", uid: "u1" },
    spec: {
      domain: { devices: { disks: [{ name: "cloudinitdisk" }] }, firmware: { uuid: "6a1e" } },
      volumes: [{ name: "cloudinitdisk", ...volume }],
      accessCredentials: [
        { sshPublicKey: { source: { secret: { secretName: "my-keys" } }, propagationMethod: { [method]: {} } } },
      ],
    },
  };
}

describe("access credential keys", () => {
  it("reads every non-empty file of the mounted Secret in name order", () => {
    const causes: DiskCause[] = [];
    const v = vmi("noCloud", { cloudInitNoCloud: { userData: "#!/bin/sh\n" } });
    expect(accessCredentialKeys(v, "noCloud", mounts, causes)).toEqual([
      "ssh-ed25519 AAAAC3 first@x\n",
      "ssh-rsa AAAAB3 second@x\n",
    ]);
    expect(accessCredentialKeys(v, "configDrive", mounts, causes)).toEqual([]); // another propagation method
    expect(causes).toEqual([]);
  });

  it.each([
    [
      "noCloud",
      { cloudInitNoCloud: { userData: "#!/bin/sh\n" } },
      '"public-keys":{"0":"ssh-ed25519 AAAAC3 first@x\\n"',
    ],
    ["configDrive", { cloudInitConfigDrive: { userData: "#!/bin/sh\n" } }, '"public_keys":{"0":"ssh-ed25519'],
  ] as const)("puts them in the %s meta-data", (method, volume, expected) => {
    const causes: DiskCause[] = [];
    const ctx = { resolveImage: imageStoreResolver(join(root, "store")), mounts, workDir: join(root, "work") };
    const [disk] = planDisks(vmi(method, volume), ctx, causes);
    expect(causes).toEqual([]);
    expect(Buffer.from(disk?.contents ?? []).toString("latin1")).toContain(expected);
  });

  it("a Secret that is not mounted is a cause naming the credential", () => {
    const causes: DiskCause[] = [];
    const v = vmi("noCloud", { cloudInitNoCloud: { userData: "#!/bin/sh\n" } });
    expect(accessCredentialKeys(v, "noCloud", [], causes)).toBeUndefined();
    expect(causes).toEqual([
      {
        field: "spec.accessCredentials[0].sshPublicKey.source.secret",
        message: expect.stringContaining(
          "Unable to read public keys found at volume: /var/run/kubevirt-private/secret/my-keys-access-cred",
        ),
      },
    ]);
  });
});
