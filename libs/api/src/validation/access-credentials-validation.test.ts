import { describe, expect, it } from "vitest";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import { validateAccessCredentials } from "./access-credentials-validation.ts";
import { path } from "./causes.ts";

const F = path("spec", "accessCredentials");
const INV = "FieldValueInvalid";
const secret = { secret: { secretName: "my-keys" } };

function spec(
  accessCredentials: unknown[],
  volumes: VirtualMachineInstanceSpec["volumes"] = [],
): VirtualMachineInstanceSpec {
  return { domain: { devices: {} }, volumes, accessCredentials } as VirtualMachineInstanceSpec;
}

describe("validateAccessCredentials() (KubeVirt's messages)", () => {
  it("accepts an SSH key from a Secret propagated through an existing noCloud volume", () => {
    const s = spec(
      [{ sshPublicKey: { source: secret, propagationMethod: { noCloud: {} } } }],
      [{ name: "cloudinit", cloudInitNoCloud: { userData: "#cloud-config\n" } }],
    );
    expect(validateAccessCredentials(F, s)).toEqual([]);
  });

  it.each([
    [
      "noCloud without a noCloud volume",
      { sshPublicKey: { source: secret, propagationMethod: { noCloud: {} } } },
      [
        [
          "spec.accessCredentials[0] requires a noCloud volume to exist when the noCloud propagationMethod is in use.",
          "spec.accessCredentials[0].sshPublicKey.propagationMethod",
        ],
      ],
    ],
    [
      "configDrive without a configDrive volume",
      { sshPublicKey: { source: secret, propagationMethod: { configDrive: {} } } },
      [
        [
          "spec.accessCredentials[0] requires a configDrive volume to exist when the configDrive propagationMethod is in use.",
          "spec.accessCredentials[0].sshPublicKey.propagationMethod",
        ],
      ],
    ],
    [
      "qemuGuestAgent without users",
      { sshPublicKey: { source: secret, propagationMethod: { qemuGuestAgent: { users: [] } } } },
      [
        [
          "spec.accessCredentials[0] requires at least one user to be present in the users list",
          "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users",
        ],
      ],
    ],
    [
      "no source and no method",
      { sshPublicKey: { source: {}, propagationMethod: {} } },
      [
        ["spec.accessCredentials[0] must have exactly one source set", "spec.accessCredentials[0].sshPublicKey.source"],
        [
          "spec.accessCredentials[0] must have exactly one propagationMethod set",
          "spec.accessCredentials[0].sshPublicKey.propagationMethod",
        ],
      ],
    ],
    [
      "both a key and a password",
      {
        sshPublicKey: { source: secret, propagationMethod: { qemuGuestAgent: { users: ["root"] } } },
        userPassword: { source: secret, propagationMethod: { qemuGuestAgent: {} } },
      },
      [["spec.accessCredentials[0] must have exactly one access credential type set", "spec.accessCredentials[0]"]],
    ],
    [
      "neither",
      {},
      [["spec.accessCredentials[0] must have exactly one access credential type set", "spec.accessCredentials[0]"]],
    ],
  ])("refuses %s", (_what, cred, expected) => {
    expect(validateAccessCredentials(F, spec([cred]))).toEqual(
      expected.map(([message, field]) => ({ type: INV, message, field })),
    );
  });
});
