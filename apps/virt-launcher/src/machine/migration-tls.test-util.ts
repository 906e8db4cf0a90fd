/**
 * Test helper: the per-migration TLS identities the two virt-handlers would mint for their launchers (@kvt/certs,
 * as virt-handler does), and the target's side of the exchange done in the tests' place.
 */
import { mintMigrationCertificate } from "@kvt/certs";
import type { MigrationTlsIdentity } from "./machine.ts";

/** A source's and a target's identity, freshly minted. */
export async function migrationTlsPair(): Promise<{ source: MigrationTlsIdentity; target: MigrationTlsIdentity }> {
  const [source, target] = await Promise.all([
    mintMigrationCertificate("kubevirt.io:migration:test:source"),
    mintMigrationCertificate("kubevirt.io:migration:test:target"),
  ]);
  return {
    source: { certificate: source.certPem, key: source.keyPem },
    target: { certificate: target.certPem, key: target.keyPem },
  };
}
