/**
 * The guest end of KubeVirt's `portforward` subresource. virt-api hands the WebSocket to the VMI's virt-handler,
 * which asks this launcher over launcher-rpc (`/v1/portforward/{port}/tcp`); the launcher runs in the pod's network
 * namespace, so it connects to the guest's address on the in-pod bridge (masquerade: 10.0.2.2 by default):
 *
 *   virtctl --wss--> API server --> virt-api --wss (mTLS)--> virt-handler --unix socket--> launcher --TCP--> guest
 *
 * KubeVirt reaches the same guest port through the pod IP, whose NAT forwards every port to the guest, or only the
 * interface's declared `ports`: the same rule applies here, so a port the binding does not forward is refused.
 * Dial errors read as Go's (`dial tcp 10.0.2.2:23: connect: connection refused`), as KubeVirt's `dialing VM: ...`
 * Status carries them.
 */
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { LauncherRpcError, type PortForwardEndpoint, type PortForwardProtocol } from "@kvt/launcher-rpc";
import type { MasqueradePlan } from "@kvt/pod-network";

/** Where the guest is reached on the pod network, and which of its ports the binding forwards. */
export interface GuestNetwork {
  /** The VMI interface's name (`default`). */
  readonly interfaceName: string;
  /** The guest's address inside the pod (masquerade: the second host of vmNetworkCIDR). */
  readonly address: string;
  /** Only these are forwarded when given (`interfaces[].ports`); every port otherwise. */
  readonly ports?: readonly { readonly protocol: "tcp" | "udp"; readonly port: number }[];
}

/** The guest network of a wired masquerade plan. */
export function guestNetworkOf(plan: MasqueradePlan): GuestNetwork {
  return { interfaceName: plan.name, address: plan.guestIp, ...(plan.ports ? { ports: plan.ports } : {}) };
}

/** How long a connect to the guest may take before it fails as `i/o timeout`. */
export const GUEST_DIAL_TIMEOUT_MS = 10_000;

/** Go's text for the connect errnos a guest port gives (syscall.Errno's strings). */
const ERRNO_TEXT: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  EHOSTUNREACH: "no route to host",
  ENETUNREACH: "network is unreachable",
  ECONNRESET: "connection reset by peer",
  ETIMEDOUT: "connection timed out",
};

/**
 * A {@link PortForwardEndpoint} that connects to the guest `current()` describes (undefined while the launcher has
 * no wired pod interface).
 */
export function guestDialer(
  current: () => GuestNetwork | undefined,
  timeoutMs = GUEST_DIAL_TIMEOUT_MS,
): PortForwardEndpoint {
  return {
    dial: (port, protocol) => {
      const net = current();
      if (!net) {
        return Promise.reject(
          new LauncherRpcError("Conflict", "the VMI has no interface bound to the pod network to forward to"),
        );
      }
      const refusal = notForwarded(net, port, protocol);
      if (refusal) return Promise.reject(refusal);
      return dialTcp(net.address, port, timeoutMs);
    },
  };
}

/** Why `port` is not reachable through the binding's declared ports, or undefined when it is. */
function notForwarded(net: GuestNetwork, port: number, protocol: PortForwardProtocol): LauncherRpcError | undefined {
  if (!net.ports || net.ports.some((p) => p.port === port && p.protocol === protocol)) return undefined;
  const declared = net.ports.map((p) => `${p.port}/${p.protocol}`).join(", ");
  return new LauncherRpcError(
    "Unavailable",
    `port ${port}/${protocol} is not forwarded to the guest: interface ${net.interfaceName} declares only ports ${declared}`,
  );
}

function dialTcp(host: string, port: number, timeoutMs: number): Promise<Duplex> {
  const address = `${host}:${port}`;
  return new Promise((resolve, reject) => {
    // Half-open allowed: the guest ending its output must not end the client's input (and the other way round).
    const socket: Socket = connect({ host, port, allowHalfOpen: true });
    const fail = (text: string, cause?: unknown): void => {
      socket.destroy();
      reject(new LauncherRpcError("Unavailable", `dial tcp ${address}: ${text}`, { cause }));
    };
    socket.setTimeout(timeoutMs, () => fail("i/o timeout"));
    socket.once("connect", () => {
      socket.setTimeout(0);
      resolve(socket); // a later error still lands in `fail`: the socket is destroyed, the settled promise ignores it
    });
    socket.once("error", (error: NodeJS.ErrnoException) => {
      const code = error.code ?? "";
      fail(`connect: ${ERRNO_TEXT[code] ?? (code || error.message)}`, error);
    });
  });
}
