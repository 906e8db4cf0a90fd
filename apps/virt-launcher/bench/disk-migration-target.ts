/**
 * The target VMM process of `npm run bench -- disk`'s migration with a copied disk (disk-migration.ts): creates the
 * machine from the same options as the source (not started), listens on loopback with a one-time secret (and its
 * TLS identity, the source's certificate pinned) and reports on stdout, one JSON object a line:
 * {"kind":"listening","destination":{..}}, {"kind":"running"} or {"kind":"failed","reason":".."}. Any line on stdin
 * stops it.
 * Usage: node disk-migration-target.ts '<VmOptions JSON>' '<TLS JSON>'
 *   TLS JSON: {"tls": {certificate, key}, "sourceCertificate": PEM}, or {"tls": false}: unencrypted, as the source
 */
import { createInterface } from "node:readline";
import { type MigrationTlsIdentity, prepareIncoming } from "@kvt/migration";
import { Vm, type VmOptions } from "@kvt/vmm";

const vm = Vm.create(JSON.parse(process.argv[2] ?? "{}") as VmOptions);
const { tls, sourceCertificate } = JSON.parse(process.argv[3] ?? '{"tls":false}') as {
  tls: MigrationTlsIdentity | false;
  sourceCertificate?: string;
};
const incoming = prepareIncoming(vm, { host: "127.0.0.1", ioTimeoutMs: 240_000, tls });
if (sourceCertificate) incoming.trustPeer(sourceCertificate);
const say = (m: object): void => void process.stdout.write(`${JSON.stringify(m)}\n`);
say({ kind: "listening", destination: incoming.destination });
incoming.done.then(
  (stats) => say({ kind: "running", receiveSeconds: stats.receiveSeconds }),
  (err: unknown) => say({ kind: "failed", reason: (err as Error).message }),
);
createInterface({ input: process.stdin }).once("line", () => {
  vm.stop();
  process.exit(0);
});
