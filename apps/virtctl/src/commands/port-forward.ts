/**
 * `virtctl port-forward TYPE/NAME[/NAMESPACE] [PROTOCOL/]LOCALPORT[:TARGETPORT]... [--stdio] [--address ADDR]`:
 * forward local ports to a VM's or VMI's ports over the `portforward` subresource (KubeVirt pkg/virtctl/portforward).
 *
 *   local TCP connection (or stdin/stdout with --stdio)
 *     ==> WebSocket plain.kubevirt.io  GET .../<virtualmachines|virtualmachineinstances>/NAME/portforward/PORT/tcp
 *     ==> API server ==> virt-api ==> virt-handler ==> virt-launcher ==> the guest's PORT
 *
 * One tunnel per local connection, as KubeVirt's virtctl opens them; the first side to end closes both. Without
 * --stdio it listens until interrupted (SIGINT/SIGTERM) and logs, as KubeVirt's does, JSON lines on stderr
 * (`forwarding tcp 127.0.0.1:8080 to 80`, with the port actually bound). With --stdio it carries one connection on
 * stdin/stdout (ssh's ProxyCommand) and exits when it closes.
 */
import { createServer, type Server, type Socket } from "node:net";
import { type Duplex, pipeline, type Writable } from "node:stream";
import { ApiError, errorMessage } from "@kvt/kube";
import { createWebSocketStream, type WebSocket } from "ws";
import { type Command, type CommandContext, CommandError } from "../cli/command.ts";
import type { VirtClient } from "../kube/client.ts";
import { vmiSubresource, vmSubresource } from "../kube/paths.ts";

const PLAIN_STREAM_PROTOCOL = "plain.kubevirt.io";

/** A `type/name[/namespace]` target, its kind normalized to `vm` or `vmi`. */
export interface ForwardTarget {
  readonly kind: "vm" | "vmi";
  readonly name: string;
  /** Absent: the kubeconfig context's (or `-n`) namespace. */
  readonly namespace?: string;
}

/** One `[protocol/]local[:remote]` argument. */
export interface ForwardedPort {
  readonly protocol: string;
  readonly local: number;
  readonly remote: number;
}

/** KubeVirt's `ParseTarget`: `type/name[/namespace]`, kind any of vm(s), vmi(s) and their long names. */
export function parseTarget(target: string): ForwardTarget {
  if (target === "") throw new CommandError("target cannot be empty");
  const parts = target.split("/");
  if (parts.length === 1) throw new CommandError("target must contain type and name separated by '/'");
  if (parts.length > 3) throw new CommandError("target is not valid with more than two '/'");
  const [rawKind = "", name = "", namespace] = parts;
  if (namespace === "") throw new CommandError("namespace cannot be empty");
  const kind = normalizeKind(rawKind);
  if (name === "") throw new CommandError("name cannot be empty");
  return { kind, name, ...(namespace !== undefined ? { namespace } : {}) };
}

function normalizeKind(kind: string): "vm" | "vmi" {
  switch (kind.toLowerCase()) {
    case "vm":
    case "vms":
    case "virtualmachine":
    case "virtualmachines":
      return "vm";
    case "vmi":
    case "vmis":
    case "virtualmachineinstance":
    case "virtualmachineinstances":
      return "vmi";
  }
  throw new CommandError(`unsupported resource type '${kind}'`);
}

function atoi(text: string): number {
  if (!/^[+-]?\d+$/.test(text)) throw new CommandError(`strconv.Atoi: parsing "${text}": invalid syntax`);
  return Number(text);
}

/** KubeVirt's `parsePort`: `[protocol/]local[:remote]`, tcp by default, remote = local when not given. */
export function parsePort(arg: string): ForwardedPort {
  const slash = arg.split("/");
  const protocol = slash.length > 1 ? (slash[0] ?? "") : "tcp";
  const rest = slash.length > 1 ? (slash[1] ?? "") : arg;
  const ports = rest.split(":").filter((p) => p !== "");
  if (ports.length < 1) throw new CommandError("invalid port, missing local and/or remote port");
  const local = atoi(ports[0] ?? "");
  const remote = ports.length > 1 ? atoi(ports[1] ?? "") : local;
  if (local < 0 || local > 65535) throw new CommandError(`invalid local port ${local}: expected 0-65535`);
  if (remote < 1 || remote > 65535) throw new CommandError(`invalid target port ${remote}: expected 1-65535`);
  if (protocol !== "tcp" && protocol !== "udp") throw new CommandError(`unknown protocol: ${protocol}`);
  if (protocol === "udp") throw new CommandError("forwarding udp ports is not supported by this cluster: use tcp");
  return { protocol, local, remote };
}

/** The subresource path of one tunnel. */
export function portForwardPath(namespace: string, target: ForwardTarget, port: number, protocol: string): string {
  const sub = `portforward/${port}/${protocol}`;
  return target.kind === "vm"
    ? vmSubresource(namespace, target.name, sub)
    : vmiSubresource(namespace, target.name, sub);
}

/** Opens one tunnel; a refusal fails with KubeVirt's `Can't connect to websocket (CODE): MESSAGE`. */
export async function openTunnel(
  client: VirtClient,
  namespace: string,
  target: ForwardTarget,
  port: ForwardedPort,
): Promise<WebSocket> {
  try {
    return await client.websocket(portForwardPath(namespace, target, port.remote, port.protocol), [
      PLAIN_STREAM_PROTOCOL,
    ]);
  } catch (error) {
    const message = errorMessage(error);
    throw new CommandError(
      error instanceof ApiError ? `Can't connect to websocket (${error.code}): ${message}` : message,
      {
        cause: error,
      },
    );
  }
}

/** A log line as KubeVirt's virtctl writes them (JSON on stderr, so stdout stays the tunnel's with --stdio). */
function logLine(ctx: CommandContext, level: "info" | "error", msg: string): void {
  ctx.stderr.write(
    `${JSON.stringify({ component: "portforward", level, msg, timestamp: new Date().toISOString() })}\n`,
  );
}

/** Carries a local stream and a tunnel both ways; resolves when both are closed (the first end closes both). */
function splice(local: Duplex, ws: WebSocket): Promise<void> {
  const remote = createWebSocketStream(ws);
  return new Promise((resolve) => {
    let open = 2;
    const done = (): void => {
      local.destroy();
      remote.destroy();
      if (--open === 0) resolve();
    };
    pipeline(local, remote, done);
    pipeline(remote, local, done);
  });
}

/** --stdio: stdin to the tunnel, the tunnel to stdout; resolves when the tunnel closes or on a signal. */
function forwardStdio(ws: WebSocket, ctx: CommandContext): Promise<void> {
  const remote = createWebSocketStream(ws);
  const stdout = ctx.stdout as Writable;
  return new Promise((resolve) => {
    let finished = false;
    const finish = (): void => {
      if (finished) return;
      finished = true;
      ctx.stdin.unpipe(remote);
      ctx.stdin.pause();
      remote.destroy();
      resolve();
    };
    remote.on("data", (chunk: Buffer) => {
      // Backpressure: a slow reader of our stdout pauses the tunnel.
      if (stdout.write(chunk) === false && typeof stdout.once === "function") {
        remote.pause();
        stdout.once("drain", () => remote.resume());
      }
    });
    remote.on("end", finish);
    remote.on("close", finish);
    remote.on("error", finish);
    ctx.stdin.pipe(remote); // stdin's end ends the tunnel (a close frame), as KubeVirt's Stream returns then
    ctx.signal.addEventListener("abort", finish, { once: true });
  });
}

/** Local connections being forwarded, destroyed when the command stops. */
const connections = new Set<Socket>();

/** Listens on `address:port.local`; each connection gets its own tunnel. Resolves with the listening server. */
async function listen(
  client: VirtClient,
  namespace: string,
  target: ForwardTarget,
  address: string,
  port: ForwardedPort,
  ctx: CommandContext,
): Promise<Server> {
  const server = createServer((local: Socket) => {
    connections.add(local);
    local.once("close", () => connections.delete(local));
    local.on("error", () => local.destroy()); // the local client vanishing is routine
    logLine(ctx, "info", `opening new tcp tunnel to ${port.remote}`);
    openTunnel(client, namespace, target, port).then(
      (ws) => splice(local, ws),
      (error: unknown) => {
        logLine(ctx, "error", `can't access ${target.kind}/${target.name}.${namespace}: ${errorMessage(error)}`);
        local.destroy();
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(new CommandError(`listen tcp ${address}:${port.local}: ${error.code ?? error.message}`, { cause: error })),
    );
    server.listen(port.local, address, () => resolve());
  });
  const bound = server.address();
  const at = typeof bound === "object" && bound ? `${bound.address}:${bound.port}` : `${address}:${port.local}`;
  logLine(ctx, "info", `forwarding ${port.protocol} ${at} to ${port.remote}`);
  return server;
}

/** The `port-forward` command. */
export const portForwardCommand: Command = {
  name: "port-forward",
  use: "port-forward type/name[/namespace] [protocol/]localPort[:targetPort]...",
  short: "Forward local ports to a virtualmachine or virtualmachineinstance.",
  long:
    "Forward local ports to a virtualmachine or virtualmachineinstance.\n\n" +
    "The target argument supports the syntax target/name[/namespace] with /namespace as optional field.\n" +
    "Kind accepts any of vmi, vmis, vm, vms, virtualmachineinstance, virtualmachine, virtualmachineinstances, virtualmachines.\n\n" +
    "The port argument supports the syntax protocol/localPort:targetPort with protocol/ and :targetPort as optional fields.\n" +
    "Protocol supports TCP (default).\n\n" +
    "Portforwards get established over the Kubernetes control-plane using websocket streams.\n" +
    "Usage can be restricted by the cluster administrator through the /portforward subresource.",
  example:
    "  # Forward the local port 8080 to the vmi port:\n  virtctl port-forward vmi/testvmi 8080\n\n" +
    "  # Forward the local port 8080 to the vmi port 9090:\n  virtctl port-forward vmi/testvmi 8080:9090\n\n" +
    "  # Forward the local port 8080 to the vm port in mynamespace\n  virtctl port-forward vm/testvm/mynamespace 8080\n\n" +
    "  # Note: virtctl port-forward sends all traffic over the Kubernetes API Server.\n" +
    "  # For continous traffic intensive connections, consider using a dedicated Kubernetes Service.",
  flags: {
    stdio: {
      type: "boolean",
      help: "--stdio=true: Set this to true to forward the tunnel to stdout/stdin; Only works with a single port",
      default: "false",
    },
    address: {
      type: "string",
      help: "--address=: Set this to the address the local ports should be opened on",
      default: "127.0.0.1",
    },
  },
  args: [2, Number.MAX_SAFE_INTEGER],
  checkArgs: (args) =>
    args.length < 2
      ? `Number of input parameters is incorrect, portforward requires at least 2 arg(s), received ${args.length}`
      : undefined,
  async run(input, ctx) {
    const [rawTarget = "", ...rawPorts] = input.args;
    const target = parseTarget(rawTarget);
    const ports = rawPorts.map(parsePort);
    const client = ctx.client();
    const namespace = target.namespace ?? client.namespace;
    if (input.values.stdio === true) {
      const [port] = ports;
      if (!port || ports.length !== 1) throw new CommandError("only one port supported when forwarding to stdout");
      const ws = await openTunnel(client, namespace, target, port);
      await forwardStdio(ws, ctx);
      return;
    }
    const address = typeof input.values.address === "string" ? input.values.address : "127.0.0.1";
    const servers: Server[] = [];
    try {
      for (const port of ports) servers.push(await listen(client, namespace, target, address, port, ctx));
      if (!ctx.signal.aborted) {
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      }
    } finally {
      for (const server of servers) server.close();
      for (const local of connections) local.destroy();
    }
  },
};
