/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString) exactly as KubeVirt formats paths into its messages. */
/**
 * `spec.accessCredentials` (KubeVirt's `validateAccessCredentials`): each entry is one SSH public key source or one
 * user password source, from exactly one Secret, with exactly one propagation method; `noCloud` and `configDrive`
 * need the matching cloud-init volume (the keys travel in its meta-data), `qemuGuestAgent` at least one user.
 */
import type { ValidationCause, VirtualMachineInstanceSpec } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";

type AccessCredential = NonNullable<VirtualMachineInstanceSpec["accessCredentials"]>[number];

function sshKeyCauses(
  f: FieldPath,
  cred: AccessCredential,
  has: { noCloud: boolean; configDrive: boolean },
): ValidationCause[] {
  const key = cred.sshPublicKey;
  if (!key) return [];
  const causes: ValidationCause[] = [];
  const method = key.propagationMethod ?? {};
  let methods = 0;
  if (method.noCloud !== undefined) {
    methods++;
    if (!has.noCloud) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `${f} requires a noCloud volume to exist when the noCloud propagationMethod is in use.`,
          f.child("sshPublicKey", "propagationMethod"),
        ),
      );
    }
  }
  if (method.configDrive !== undefined) {
    methods++;
    if (!has.configDrive) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `${f} requires a configDrive volume to exist when the configDrive propagationMethod is in use.`,
          f.child("sshPublicKey", "propagationMethod"),
        ),
      );
    }
  }
  if (method.qemuGuestAgent !== undefined) {
    methods++;
    if ((method.qemuGuestAgent.users ?? []).length === 0) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `${f} requires at least one user to be present in the users list`,
          f.child("sshPublicKey", "propagationMethod", "qemuGuestAgent", "users"),
        ),
      );
    }
  }
  if (key.source?.secret === undefined) {
    causes.push(cause(CAUSE_TYPE.invalid, `${f} must have exactly one source set`, f.child("sshPublicKey", "source")));
  }
  if (methods !== 1) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${f} must have exactly one propagationMethod set`,
        f.child("sshPublicKey", "propagationMethod"),
      ),
    );
  }
  return causes;
}

function passwordCauses(f: FieldPath, cred: AccessCredential): ValidationCause[] {
  const password = cred.userPassword;
  if (!password) return [];
  const causes: ValidationCause[] = [];
  if (password.source?.secret === undefined) {
    causes.push(cause(CAUSE_TYPE.invalid, `${f} must have exactly one source set`, f.child("userPassword", "source")));
  }
  if (password.propagationMethod?.qemuGuestAgent === undefined) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${f} must have exactly one propagationMethod set`,
        f.child("userPassword", "propagationMethod"),
      ),
    );
  }
  return causes;
}

/** The causes of `spec.accessCredentials` at `field` (`spec.accessCredentials`). */
export function validateAccessCredentials(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const volumes = spec.volumes ?? [];
  const has = {
    noCloud: volumes.some((v) => v.cloudInitNoCloud !== undefined),
    configDrive: volumes.some((v) => v.cloudInitConfigDrive !== undefined),
  };
  return (spec.accessCredentials ?? []).flatMap((cred, idx) => {
    const f = field.index(idx);
    const kinds = (cred.sshPublicKey ? 1 : 0) + (cred.userPassword ? 1 : 0);
    return [
      ...sshKeyCauses(f, cred, has),
      ...passwordCauses(f, cred),
      ...(kinds === 1 ? [] : [cause(CAUSE_TYPE.invalid, `${f} must have exactly one access credential type set`, f)]),
    ];
  });
}
