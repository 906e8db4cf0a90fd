/**
 * Test fixture: a second process standing in for the target launcher of a migration. Reads a MachineSpec (JSON) from
 * argv[2] and its TLS from argv[3] ({"tls": {certificate, key}, "sourceCertificate": PEM}, or {"tls": false}),
 * prepares an incoming QEMU migration (the source's certificate pinned) and reports as JSON lines on stdout:
 *   {"event":"target","target":{host,port,secret}}  {"event":"state","state":..,"reason":..}  {"event":"console","text":..}
 * A line "shutdown <graceMs>" on stdin asks the guest to power off; the process exits once the machine has ended.
 */
import { createInterface } from "node:readline";
import { createLogger } from "@kvt/observability";
import type { MachineSpec, MigrationTlsIdentity } from "../machine.ts";
import { QemuMachine } from "./qemu-machine.ts";

const spec = JSON.parse(process.argv[2] ?? "{}") as MachineSpec;
const machine = new QemuMachine(spec, { logger: createLogger({ component: "migration-target", level: "silent" }) });
const send = (o: object): void => void process.stdout.write(`${JSON.stringify(o)}\n`);
machine.on("console", (c) => send({ event: "console", text: Buffer.from(c).toString("latin1") }));
machine.on("state", (state, reason) => {
  send({ event: "state", state, reason });
  if (state === "stopped" || state === "crashed") process.exitCode = 0;
});
const { tls, sourceCertificate } = JSON.parse(process.argv[3] ?? '{"tls":false}') as {
  tls: MigrationTlsIdentity | false;
  sourceCertificate?: string;
};
const target = await machine.prepareIncoming({ tls });
if (sourceCertificate) machine.trustMigrationSource(sourceCertificate);
send({ event: "target", target });
for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, arg] = line.split(" ");
  if (cmd === "shutdown") await machine.shutdown(Number(arg) || 60_000);
  if (machine.state === "stopped" || machine.state === "crashed") break;
}
await machine.kill();
