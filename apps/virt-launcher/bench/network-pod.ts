/**
 * One launcher pod of `npm run bench -- network`, run inside the pod's network namespace (the bench starts it with
 * `nsenter --net=<the pod's netns>`, as the process-kubelet starts a launcher container): it wires KubeVirt's
 * masquerade binding with the launcher's own code (network/pod-network.ts: k6t-eth0, tap0, the nftables NAT, the
 * DHCP server) and runs the guest on the launcher's machine backend, our VMM (NativeMachine) or QEMU (QemuMachine,
 * -accel kvm: the same KVM as ours), as a source (boots) or a migration target (listens on the pod IP, KubeVirt's
 * migration port 49152, which the binding never forwards to the guest).
 *
 *   stdout, one JSON object a line:  {"kind":"wired","tap":..,"mac":..}
 *                                    {"kind":"running"}              the guest runs (booted, or arrived)
 *                                    {"kind":"listening","target":{host,port,secret}}
 *                                    {"kind":"console","base64":..}  guest console output
 *                                    {"kind":"migrated","result":{ok,downtimeMs,totalSeconds,...}}
 *                                    {"kind":"state","state":..,"reason":..}
 *                                    {"kind":"error","message":..}   the pod cannot go on (it exits 1)
 *   stdin, one JSON object a line:   {"migrate":{host,port,secret,certificate},"tls":{certificate,key}}
 *                                                                    live-migrate there over TLS (source)
 *                                    {"console":"text"}              typed on the guest's serial console
 *                                    {"stop":true}                   kill the guest and exit (also on stdin's end)
 *
 * Usage: nsenter --net=/run/netns/NS node network-pod.ts '<NetworkPodConfig JSON>'
 */
import { readdirSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createLogger } from "@kvt/observability";
import { type MasqueradePlan, MIGRATION_PORTS, wirePodNetwork } from "@kvt/pod-network";
import { nativeVmm } from "@kvt/vmm";
import type {
  Machine,
  MachineSpec,
  MigrationOptions,
  MigrationTarget,
  MigrationTlsIdentity,
} from "../src/machine/machine.ts";
import { NativeMachine } from "../src/machine/native/native-machine.ts";
import { QemuMachine } from "../src/machine/qemu/qemu-machine.ts";

/** What one pod runs. */
export interface NetworkPodConfig {
  readonly backend: "native" | "qemu";
  readonly role: "source" | "target";
  /** The pod's IP: a target listens there. */
  readonly podIp: string;
  /** The guest (its disks written already; nics and podNetwork are added here). */
  readonly spec: MachineSpec;
  readonly plan: MasqueradePlan;
  /** The NIC's data path (MachineNic.vhost; default auto). */
  readonly vhost?: "off" | "auto" | "on";
  /** A target's TLS identity and the source's certificate it accepts (the handlers' part, done by the bench). */
  readonly migrationTls?: { readonly identity: MigrationTlsIdentity; readonly sourceCertificate: string };
}

/** The migration settings of both backends' moves (KubeVirt's defaults where they apply; no bandwidth cap). */
export const BENCH_MIGRATION_OPTIONS: Omit<MigrationOptions, "tls"> = {
  bandwidthBytesPerSec: 0,
  maxDowntimeMs: 300,
  allowAutoConverge: true,
  completionTimeoutSec: 600,
  progressTimeoutSec: 300,
};

const say = (m: object): void => void process.stdout.write(`${JSON.stringify(m)}\n`);

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? "{}") as NetworkPodConfig;
  const logger = createLogger({ component: "network-bench-pod", level: "warn" });
  const wired = await wirePodNetwork(config.plan, logger);
  say({ kind: "wired", tap: wired.tap, mac: wired.mac });
  const spec: MachineSpec = {
    ...config.spec,
    podNetwork: config.plan,
    nics: [{ tap: wired.tap, mac: wired.mac, model: "virtio", vhost: config.vhost ?? "auto" }],
  };
  const [port] = MIGRATION_PORTS;
  const machine: Machine =
    config.backend === "native"
      ? new NativeMachine(spec, nativeVmm, logger, config.podIp, port)
      : new QemuMachine(spec, { logger, accel: "kvm", migrationHost: config.podIp, migrationPort: port });
  machine.on("console", (chunk) => say({ kind: "console", base64: Buffer.from(chunk).toString("base64") }));
  machine.on("state", (state, reason) => {
    say({ kind: "state", state, reason });
    if (state === "running") say({ kind: "running" });
  });
  const stop = async (): Promise<void> => {
    await machine.kill().catch(() => undefined); // already stopped (migrated away, or never started)
    await wired.close();
    process.exit(0);
  };
  const commands = createInterface({ input: process.stdin });
  commands.on("line", (line) => {
    const c = JSON.parse(line) as {
      migrate?: MigrationTarget;
      tls?: MigrationTlsIdentity;
      console?: string;
      stop?: boolean;
      datapath?: boolean;
    };
    if (c.stop) void stop();
    if (c.datapath) say({ kind: "datapath", vhost: ownsVhostWorker() });
    if (c.console !== undefined) machine.writeConsole(Buffer.from(c.console));
    if (c.migrate) {
      machine.migrateTo(c.migrate, { ...BENCH_MIGRATION_OPTIONS, tls: c.tls ?? false }).then(
        (result) => say({ kind: "migrated", result }),
        (err: unknown) => say({ kind: "migrated", result: { ok: false, failureReason: (err as Error).message } }),
      );
    }
  });
  commands.on("close", () => void stop()); // the bench went away: nobody measures this guest any more
  if (config.role === "source") await machine.start();
  else {
    const target = await machine.prepareIncoming({ tls: config.migrationTls?.identity ?? false });
    if (config.migrationTls) machine.trustMigrationSource(config.migrationTls.sourceCertificate);
    say({ kind: "listening", target });
  }
}

/**
 * Whether a vhost-net worker serves this process or a child of it (QEMU). The kernel names the worker
 * `vhost-<id of the thread that claimed the device>` (a vCPU thread of our VMM, a thread of QEMU): a kernel thread
 * before Linux 6.4, a thread of the owner since.
 */
function ownsVhostWorker(): boolean {
  const read = (path: string): string => {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return ""; // gone meanwhile
    }
  };
  const field = (pid: number, name: string): number =>
    Number(new RegExp(`^${name}:\\s*(\\d+)`, "m").exec(read(`/proc/${pid}/status`))?.[1] ?? Number.NaN);
  const names = readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .flatMap((pid) => {
      let threads: string[] = [];
      try {
        threads = readdirSync(`/proc/${pid}/task`).map((t) => read(`/proc/${pid}/task/${t}/comm`).trim());
      } catch {
        // gone meanwhile
      }
      return [read(`/proc/${pid}/comm`).trim(), ...threads];
    });
  return names.some((name) => {
    const owner = Number(/^vhost-(\d+)$/.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isInteger(owner)) return false;
    const tgid = field(owner, "Tgid"); // the owning thread's process
    return tgid === process.pid || field(tgid, "PPid") === process.pid;
  });
}

main().catch((err: unknown) => {
  say({ kind: "error", message: (err as Error).stack ?? String(err) });
  process.exit(1);
});
