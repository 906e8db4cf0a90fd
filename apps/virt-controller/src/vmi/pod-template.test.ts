import { newVmi, withMemory } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { accessCredentialSecrets, renderLauncherPod } from "./pod-template.ts";

describe("launcher pod access credentials (KubeVirt's withAccessCredentials)", () => {
  const vmi = newVmi("vm-keys", withMemory("64Mi"), (v) => {
    v.spec.accessCredentials = [
      { sshPublicKey: { source: { secret: { secretName: "my-keys" } }, propagationMethod: { noCloud: {} } } },
      { userPassword: { source: { secret: { secretName: "my-pass" } }, propagationMethod: { qemuGuestAgent: {} } } },
      { sshPublicKey: { source: { secret: { secretName: "my-keys" } }, propagationMethod: { configDrive: {} } } },
    ];
  });

  it("mounts each credential's Secret read-only at <secret>-access-cred, once per Secret", () => {
    expect(accessCredentialSecrets(vmi)).toEqual(["my-keys", "my-pass"]);
    const pod = renderLauncherPod(vmi);
    expect(pod.spec?.volumes?.filter((v) => v.name.endsWith("-access-cred"))).toEqual([
      { name: "my-keys-access-cred", secret: { secretName: "my-keys" } },
      { name: "my-pass-access-cred", secret: { secretName: "my-pass" } },
    ]);
    expect(pod.spec?.containers[0]?.volumeMounts?.filter((m) => m.name.endsWith("-access-cred"))).toEqual([
      {
        name: "my-keys-access-cred",
        mountPath: "/var/run/kubevirt-private/secret/my-keys-access-cred",
        readOnly: true,
      },
      {
        name: "my-pass-access-cred",
        mountPath: "/var/run/kubevirt-private/secret/my-pass-access-cred",
        readOnly: true,
      },
    ]);
  });

  it("renders no such volume without access credentials", () => {
    const pod = renderLauncherPod(newVmi("plain", withMemory("64Mi")));
    expect(pod.spec?.volumes?.some((v) => v.name.endsWith("-access-cred"))).toBe(false);
  });
});
