/**
 * Wires the masquerade binding inside the launcher pod's network namespace (masquerade-plan.ts says what): the
 * k6t-eth0 bridge with the gateway address, the guest's tap on it, IPv4 forwarding in the pod, KubeVirt's nftables
 * NAT, and the DHCP server. Only ever run in a pod's own namespace (the process-kubelet's or a real node's pod
 * network), never in a host's. Idempotent for a migration target that finds the devices already there.
 */
import { execFile, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import type { Logger } from "@kvt/observability";
import { type DhcpServer, startDhcpServer } from "./dhcp-server.ts";
import { leaseDns } from "./guest-lease.ts";
import { BRIDGE, type MasqueradePlan, masqueradeRuleset, POD_INTERFACE, TAP } from "./masquerade-plan.ts";

const exec = promisify(execFile);

/** The wired binding: the tap the VMM attaches the guest's NIC to. */
export interface WiredMasquerade {
  readonly tap: string;
  readonly mac: string;
  readonly dhcp: DhcpServer;
  close(): Promise<void>;
}

/** A command of the wiring failed; the message names it and carries its stderr. */
export class PodNetworkWiringError extends Error {
  override name = "PodNetworkWiringError";
}

/** Runs a command of the wiring; a failure is a PodNetworkWiringError carrying the command and its stderr. */
export async function run(cmd: string, args: readonly string[]): Promise<void> {
  try {
    await exec(cmd, args);
  } catch (err) {
    const raw = (err as { stderr?: unknown }).stderr;
    const stderr = (typeof raw === "string" ? raw : Buffer.isBuffer(raw) ? raw.toString() : "").trim();
    throw new PodNetworkWiringError(`${cmd} ${args.join(" ")} failed: ${stderr || (err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * A link of this namespace as `ip -j link show` reports it. Never read from /sys/class/net: sysfs shows the links of
 * the namespace it was mounted in, and a launcher entering its pod's namespace (nsenter) keeps the node's mount.
 */
export async function linkInfo(name: string): Promise<{ readonly address?: string; readonly mtu?: number }> {
  try {
    const { stdout } = await exec("ip", ["-j", "link", "show", "dev", name]);
    const [link] = JSON.parse(stdout) as { address?: unknown; mtu?: unknown }[];
    return {
      ...(typeof link?.address === "string" ? { address: link.address } : {}),
      ...(typeof link?.mtu === "number" ? { mtu: link.mtu } : {}),
    };
  } catch (err) {
    throw new PodNetworkWiringError(`cannot read the link ${name}: ${(err as Error).message}`, { cause: err });
  }
}

/** True when this namespace has a link of that name. */
export async function linkExists(name: string): Promise<boolean> {
  return exec("ip", ["link", "show", "dev", name]).then(
    () => true,
    () => false,
  );
}

function nftLoad(script: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("nft", ["-f", "-"], { stdio: ["pipe", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", (e) => reject(new PodNetworkWiringError(`cannot run nft: ${e.message}`, { cause: e })));
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new PodNetworkWiringError(`nft -f - failed: ${stderr.trim()}`)),
    );
    child.stdin.end(script);
  });
}

/** Wires `plan` in this process's network namespace and starts the guest's DHCP server. */
export async function wireMasquerade(plan: MasqueradePlan, log: Logger): Promise<WiredMasquerade> {
  if (!(await linkExists(POD_INTERFACE)))
    throw new PodNetworkWiringError(`the pod has no ${POD_INTERFACE}: the masquerade binding needs the pod network`);
  const mtu = (await linkInfo(POD_INTERFACE)).mtu ?? 1500;
  if (!(await linkExists(BRIDGE))) {
    await run("ip", ["link", "add", BRIDGE, "type", "bridge"]);
    await run("ip", ["addr", "add", `${plan.gateway}/${plan.prefixLength}`, "dev", BRIDGE]);
    await run("ip", ["link", "set", BRIDGE, "mtu", String(mtu), "up"]);
    await run("ip", ["tuntap", "add", "dev", TAP, "mode", "tap"]);
    await run("ip", ["link", "set", TAP, "mtu", String(mtu), "master", BRIDGE, "up"]);
    // Forwarding between the guest's bridge and eth0, in this pod's namespace only (the sysctl is per namespace).
    writeFileSync("/proc/sys/net/ipv4/ip_forward", "1\n");
    await nftLoad(masqueradeRuleset(plan));
  }
  const dns = leaseDns(readResolvConf(), plan.subdomain);
  const last = plan.gateway.split(".").map(Number);
  const hostBits = 32 - plan.prefixLength;
  const base = ((last[0] << 24) | (last[1] << 16) | (last[2] << 8) | last[3]) >>> 0;
  const bcast = (base | (2 ** hostBits - 1)) >>> 0;
  const broadcast = [bcast >>> 24, (bcast >>> 16) & 255, (bcast >>> 8) & 255, bcast & 255].join(".");
  const dhcp = await startDhcpServer({
    mac: plan.mac,
    broadcast,
    log,
    lease: {
      ip: plan.guestIp,
      prefixLength: plan.prefixLength,
      router: plan.gateway,
      serverIp: plan.gateway,
      ...dns,
      hostname: plan.hostname,
      mtu,
      leaseSeconds: 0xffffffff,
      ...(plan.dhcpOptions ? { extra: plan.dhcpOptions } : {}),
    },
  });
  log.info({ tap: TAP, mac: plan.mac, guestIp: plan.guestIp, ports: plan.ports ?? "all" }, "masquerade binding wired");
  return { tap: TAP, mac: plan.mac, dhcp, close: () => dhcp.close() };
}

/** The pod's /etc/resolv.conf, or undefined when it has none (the lease then carries no name servers). */
export function readResolvConf(): string | undefined {
  try {
    return readFileSync("/etc/resolv.conf", "utf8");
  } catch {
    return undefined; // KubeVirt's lease carries no name servers when the pod has none
  }
}
