/**
 * How the one-time migration secret travels from the target handler to the source handler: a core/v1 Secret
 * `kubevirt-migration-<migrationUid>` in the VMI's namespace, owned by the VMI (garbage-collected with it). The
 * target launcher's listener refuses any peer that cannot prove knowledge of it (HMAC challenge); the secret
 * never appears in VMI status, which every VMI reader can see.
 */
import type { VirtualMachineInstance } from "@kvt/api";
import { isAlreadyExists, type KubeObject, type ResourceClient } from "@kvt/kube";

/** Stores and fetches migration secrets. */
export interface MigrationSecrets {
  /** Target side: record `secret` for `migrationUid` (replacing an older one from a retried prepare). */
  publish(vmi: VirtualMachineInstance, migrationUid: string, secret: string): Promise<void>;
  /** Source side: the secret the target published; throws when it is missing. */
  read(vmi: VirtualMachineInstance, migrationUid: string): Promise<string>;
}

/** A core/v1 Secret (the fields used here). */
export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** The core/v1 Secret resource type. */
export const SECRETS = { group: "", version: "v1", plural: "secrets", kind: "Secret", namespaced: true } as const;

/** The Secret's name for a migration. */
export function migrationSecretName(migrationUid: string): string {
  return `kubevirt-migration-${migrationUid}`;
}

/** {@link MigrationSecrets} over the API server. */
export class ApiMigrationSecrets implements MigrationSecrets {
  readonly #secrets: ResourceClient<Secret>;
  constructor(secrets: ResourceClient<Secret>) {
    this.#secrets = secrets;
  }

  async publish(vmi: VirtualMachineInstance, migrationUid: string, secret: string): Promise<void> {
    const namespace = vmi.metadata?.namespace ?? "default";
    const body: Secret = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: migrationSecretName(migrationUid),
        namespace,
        labels: { "kubevirt.io/migrationJobUID": migrationUid },
        ownerReferences: [
          {
            apiVersion: "kubevirt.io/v1",
            kind: "VirtualMachineInstance",
            name: vmi.metadata?.name ?? "",
            uid: vmi.metadata?.uid ?? "",
          },
        ],
      },
      type: "Opaque",
      data: { secret: Buffer.from(secret, "utf8").toString("base64") },
    };
    try {
      await this.#secrets.create(body);
    } catch (error) {
      if (!isAlreadyExists(error)) throw error;
      const existing = await this.#secrets.get(namespace, migrationSecretName(migrationUid));
      await this.#secrets.update({ ...existing, data: body.data });
    }
  }

  async read(vmi: VirtualMachineInstance, migrationUid: string): Promise<string> {
    const s = await this.#secrets.get(vmi.metadata?.namespace ?? "default", migrationSecretName(migrationUid));
    const value = s.data?.secret;
    if (!value) throw new Error(`migration secret ${migrationSecretName(migrationUid)} has no data.secret`);
    return Buffer.from(value, "base64").toString("utf8");
  }
}
