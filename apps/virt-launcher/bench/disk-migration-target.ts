/**
 * The target VMM process of `npm run bench -- disk`'s migration with a copied disk (disk-migration.ts): creates the
 * machine from the same options as the source (not started), listens on loopback with a one-time secret and
 * reports on stdout, one JSON object a line: {"kind":"listening","destination":{..}}, {"kind":"running"} or
 * {"kind":"failed","reason":".."}. Any line on stdin stops it.
 * Usage: node disk-migration-target.ts '<VmOptions JSON>' [plain] ("plain": the stream unencrypted, as the source's)
 */
import { createInterface } from "node:readline";
import { prepareIncoming } from "@kvt/migration";
import { Vm, type VmOptions } from "@kvt/vmm";

const vm = Vm.create(JSON.parse(process.argv[2] ?? "{}") as VmOptions);
const encrypt = process.argv[3] !== "plain";
const incoming = prepareIncoming(vm, { host: "127.0.0.1", ioTimeoutMs: 240_000, encrypt });
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
