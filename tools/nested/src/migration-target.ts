/**
 * The target VMM process of the nested lane's live migration (a second Node process inside L1, spawned by
 * migration-peer.ts). It creates the demo guest's machine from the same options as the source (as the launcher
 * does: not started; memory and vCPU state arrive from the source), listens on loopback with a one-time secret and
 * its TLS identity, the source's certificate pinned (@kvt/migration prepareIncoming), and runs the guest once it has
 * arrived.
 *
 *   stdout, one JSON object a line:  {"kind":"listening","destination":{host,port,secret}}
 *                                    {"kind":"running","stats":{...}}      the guest runs here now
 *                                    {"kind":"failed","reason":"..."}      nothing was started
 *                                    {"kind":"serial","base64":"..."}      guest console output
 *                                    {"kind":"shutdown","reason":"guest-exit","code":0}
 *                                    {"kind":"error","message":"..."}      a command failed (e.g. Ctrl-Alt-Del: EAGAIN)
 *   stdin, one JSON object a line:   {"serial":"text"}  console input      {"ctrlAltDel":true}  on the keyboard
 *                                    {"stop":true}  stop the VM and exit
 *
 * Usage (inside L1): node tools/nested/src/migration-target.ts '<DemoOptions JSON>' '<TLS JSON>'
 *   TLS JSON: {"tls": {certificate, key}, "sourceCertificate": PEM}, or {"tls": false} (a plain stream)
 */
import { createInterface } from "node:readline";
import { type MigrationTarget, type MigrationTlsIdentity, prepareIncoming } from "@kvt/migration";
import { Vm } from "@kvt/vmm";
import { type DemoOptions, demoVmOptions } from "./demo-guest.ts";

/** One line of the target's report. */
export type TargetMessage =
  | { readonly kind: "listening"; readonly destination: MigrationTarget }
  | { readonly kind: "running"; readonly stats: Record<string, unknown> }
  | { readonly kind: "failed"; readonly reason: string }
  | { readonly kind: "serial"; readonly base64: string }
  | { readonly kind: "shutdown"; readonly reason: string; readonly code: number }
  | { readonly kind: "error"; readonly message: string };

function send(message: TargetMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function main(): void {
  const options = JSON.parse(process.argv[2] ?? "{}") as DemoOptions;
  const vm = Vm.create(demoVmOptions(options));
  vm.on("serial-output", (chunk) => send({ kind: "serial", base64: Buffer.from(chunk).toString("base64") }));
  vm.on("shutdown", (e) => send({ kind: "shutdown", reason: e.reason, code: e.code }));
  const { tls, sourceCertificate } = JSON.parse(process.argv[3] ?? '{"tls":false}') as {
    tls: MigrationTlsIdentity | false;
    sourceCertificate?: string;
  };
  const incoming = prepareIncoming(vm, { host: "127.0.0.1", ioTimeoutMs: 240_000, tls });
  if (sourceCertificate) incoming.trustPeer(sourceCertificate);
  send({ kind: "listening", destination: incoming.destination });
  incoming.done.then(
    (stats) => send({ kind: "running", stats: { ...stats } }),
    (err: unknown) => send({ kind: "failed", reason: (err as Error).message }),
  );
  const stop = (): never => {
    vm.stop();
    process.exit(0);
  };
  const commands = createInterface({ input: process.stdin });
  commands.on("line", (line) => {
    const command = JSON.parse(line) as { serial?: string; ctrlAltDel?: boolean; stop?: boolean };
    if (command.serial !== undefined) vm.writeSerial(command.serial);
    if (command.ctrlAltDel) {
      try {
        vm.sendCtrlAltDel();
      } catch (err) {
        // Reported to the source process, whose check then fails with the reason.
        send({ kind: "error", message: (err as Error).message });
      }
    }
    if (command.stop) stop();
  });
  commands.on("close", stop); // the source process went away: nobody drives this guest any more
}

main();
