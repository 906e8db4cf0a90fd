import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { PassThrough } from "node:stream";
import { type ApiError, statusError } from "@kvt/kube";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { runVirtctl } from "../cli/cli.ts";
import type { VirtClient } from "../kube/client.ts";
import { COMMANDS } from "./index.ts";
import { parsePort, parseTarget } from "./port-forward.ts";

/** A "cluster" whose portforward subresource echoes upper-cased; `refuse` makes the next upgrade fail. */
let wsServer: Server;
let wss: WebSocketServer;
let wsPort: number;

beforeAll(async () => {
  wsServer = createServer();
  wss = new WebSocketServer({ server: wsServer });
  wss.on("connection", (ws) => {
    ws.on("message", (d: Buffer) => ws.send(Buffer.from(d.toString().toUpperCase())));
  });
  await new Promise<void>((resolve) => wsServer.listen(0, "127.0.0.1", resolve));
  wsPort = (wsServer.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const c of wss.clients) c.terminate();
  await new Promise<void>((resolve) => wsServer.close(() => resolve()));
});

class TunnelClient implements VirtClient {
  readonly namespace = "default";
  readonly paths: string[] = [];
  refuse: ApiError | undefined;
  request(): Promise<unknown> {
    return Promise.reject(new Error("no requests here"));
  }
  websocket(path: string, protocols: readonly string[]): Promise<WebSocket> {
    this.paths.push(path);
    expect(protocols).toEqual(["plain.kubevirt.io"]);
    if (this.refuse) return Promise.reject(this.refuse);
    const ws = new WebSocket(`ws://127.0.0.1:${wsPort}`);
    return new Promise((resolve, reject) => {
      ws.once("open", () => {
        ws.pause();
        resolve(ws);
      });
      ws.once("error", reject);
    });
  }
}

function start(argv: string[], client: TunnelClient, stdin = new PassThrough()) {
  const out = new PassThrough();
  const err = new PassThrough();
  let o = "";
  let e = "";
  out.on("data", (c: Buffer) => (o += c.toString()));
  err.on("data", (c: Buffer) => (e += c.toString()));
  const abort = new AbortController();
  const done = runVirtctl(argv, COMMANDS, {
    stdin,
    stdout: out,
    stderr: err,
    env: {},
    signal: abort.signal,
    makeClient: () => client,
  });
  return { done, abort, out: () => o, err: () => e, stdin };
}

describe("parseTarget() (KubeVirt's type/name[/namespace])", () => {
  it.each([
    ["vmi/testvmi", { kind: "vmi", name: "testvmi" }],
    ["vm/testvm/mynamespace", { kind: "vm", name: "testvm", namespace: "mynamespace" }],
    ["VirtualMachineInstances/a.b", { kind: "vmi", name: "a.b" }],
    ["vms/x", { kind: "vm", name: "x" }],
  ])("%s", (arg, expected) => {
    expect(parseTarget(arg)).toEqual(expected);
  });

  it.each([
    ["", "target cannot be empty"],
    ["testvmi", "target must contain type and name separated by '/'"],
    ["vmi/a/b/c", "target is not valid with more than two '/'"],
    ["vmi/a/", "namespace cannot be empty"],
    ["pod/a", "unsupported resource type 'pod'"],
    ["vmi/", "name cannot be empty"],
  ])("%s fails: %s", (arg, message) => {
    expect(() => parseTarget(arg)).toThrow(message);
  });
});

describe("parsePort() (KubeVirt's [protocol/]local[:remote])", () => {
  it.each([
    ["8080", { protocol: "tcp", local: 8080, remote: 8080 }],
    ["8080:22", { protocol: "tcp", local: 8080, remote: 22 }],
    ["tcp/0:22", { protocol: "tcp", local: 0, remote: 22 }],
  ])("%s", (arg, expected) => {
    expect(parsePort(arg)).toEqual(expected);
  });

  it.each([
    [":", "invalid port, missing local and/or remote port"],
    ["abc", 'strconv.Atoi: parsing "abc": invalid syntax'],
    ["80:x", 'strconv.Atoi: parsing "x": invalid syntax'],
    ["70000", "invalid local port 70000"],
    ["sctp/80", "unknown protocol: sctp"],
    ["udp/53", "forwarding udp ports is not supported"],
  ])("%s fails: %s", (arg, message) => {
    expect(() => parsePort(arg)).toThrow(message);
  });
});

describe("virtctl port-forward", () => {
  it("listens on the address, logs the bound port, and tunnels each connection to the target port", async () => {
    const client = new TunnelClient();
    const run = start(["port-forward", "vmi/vm1", "0:22"], client);
    await expect.poll(() => run.err()).toMatch(/forwarding tcp 127\.0\.0\.1:\d+ to 22/);
    const port = Number(/127\.0\.0\.1:(\d+) to 22/.exec(run.err())?.[1]);
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => socket.write("ssh-2.0"));
      socket.once("data", (d: Buffer) => {
        socket.destroy();
        resolve(d.toString());
      });
      socket.once("error", reject);
    });
    expect(reply).toBe("SSH-2.0");
    expect(client.paths).toEqual([
      "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm1/portforward/22/tcp",
    ]);
    run.abort.abort();
    expect(await run.done).toBe(0);
    // Stopped: the port is closed again.
    await expect(
      new Promise((resolve, reject) => {
        const s = connect(port, "127.0.0.1", () => resolve("connected"));
        s.once("error", reject);
      }),
    ).rejects.toThrow(/ECONNREFUSED/);
  });

  it("a refused tunnel is logged and the local connection closed; the listener stays", async () => {
    const client = new TunnelClient();
    client.refuse = statusError(500, "InternalError", "Internal error occurred: dialing VM: connection refused");
    const run = start(["port-forward", "vm/vm2/other", "0:23"], client);
    await expect.poll(() => run.err()).toMatch(/forwarding tcp/);
    const port = Number(/127\.0\.0\.1:(\d+) to 23/.exec(run.err())?.[1]);
    await new Promise<void>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("close", () => resolve());
      socket.once("error", () => {});
    });
    expect(run.err()).toContain(
      "can't access vm/vm2.other: Can't connect to websocket (500): Internal error occurred: dialing VM: connection refused",
    );
    expect(client.paths).toEqual([
      "/apis/subresources.kubevirt.io/v1/namespaces/other/virtualmachines/vm2/portforward/23/tcp",
    ]);
    run.abort.abort();
    expect(await run.done).toBe(0);
  });

  it("--stdio carries stdin to the tunnel and the tunnel to stdout, and ends with stdin", async () => {
    const client = new TunnelClient();
    const run = start(["port-forward", "--stdio=true", "vmi/vm1/ns1", "22"], client);
    run.stdin.write("hello");
    await expect.poll(() => run.out()).toBe("HELLO");
    run.stdin.end();
    expect(await run.done).toBe(0);
    expect(client.paths[0]).toBe(
      "/apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vm1/portforward/22/tcp",
    );
  });

  it("--stdio fails with KubeVirt's message when the tunnel is refused, and with more than one port", async () => {
    const client = new TunnelClient();
    client.refuse = statusError(
      409,
      "Conflict",
      'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": VMI is not started',
    );
    const refused = start(["port-forward", "--stdio", "vm/vm1", "22"], client);
    expect(await refused.done).toBe(1);
    expect(refused.err()).toContain("Can't connect to websocket (409): Operation cannot be fulfilled");
    const two = start(["port-forward", "--stdio", "vm/vm1", "22", "80"], client);
    expect(await two.done).toBe(1);
    expect(two.err()).toContain("only one port supported when forwarding to stdout");
  });

  it("needs a target and a port", async () => {
    const run = start(["port-forward", "vmi/vm1"], new TunnelClient());
    expect(await run.done).toBe(1);
    expect(run.err()).toContain("portforward requires at least 2 arg(s), received 1");
  });
});
