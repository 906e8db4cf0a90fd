import { createServer, type Server } from "node:net";
import type { Duplex } from "node:stream";
import { LauncherRpcError } from "@kvt/launcher-rpc";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GuestNetwork, guestDialer, guestNetworkOf } from "./port-forward.ts";

let guest: Server;
let port: number;

beforeAll(async () => {
  guest = createServer((s) => s.end("SSH-2.0-dropbear\r\n"));
  await new Promise<void>((resolve) => guest.listen(0, "127.0.0.1", resolve));
  port = (guest.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((resolve) => guest.close(() => resolve())));

function read(stream: Duplex): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    stream.on("data", (d: Buffer) => {
      text += d.toString();
    });
    stream.on("end", () => {
      stream.destroy(); // half-open until then: the guest's close() would wait for it
      resolve(text);
    });
    stream.on("error", reject);
  });
}

const everyPort: GuestNetwork = { interfaceName: "default", address: "127.0.0.1" };

describe("guestDialer()", () => {
  it("connects to the guest's address and port", async () => {
    const stream = await guestDialer(() => everyPort).dial(port, "tcp");
    expect(await read(stream)).toBe("SSH-2.0-dropbear\r\n");
  });

  it("a closed port fails as Go's dial error, Unavailable", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const closedPort = (closed.address() as { port: number }).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const error = await guestDialer(() => everyPort)
      .dial(closedPort, "tcp")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LauncherRpcError);
    expect(error).toMatchObject({
      code: "Unavailable",
      message: `dial tcp 127.0.0.1:${closedPort}: connect: connection refused`,
    });
  });

  it("a port the interface does not declare is refused without dialing", async () => {
    const declared: GuestNetwork = { ...everyPort, ports: [{ protocol: "tcp", port: 80 }] };
    await expect(guestDialer(() => declared).dial(port, "tcp")).rejects.toMatchObject({
      code: "Unavailable",
      message: `port ${port}/tcp is not forwarded to the guest: interface default declares only ports 80/tcp`,
    });
    const open: GuestNetwork = { ...everyPort, ports: [{ protocol: "tcp", port }] };
    expect(await read(await guestDialer(() => open).dial(port, "tcp"))).toContain("dropbear");
  });

  it("a launcher without a wired pod interface refuses with Conflict", async () => {
    await expect(guestDialer(() => undefined).dial(22, "tcp")).rejects.toMatchObject({ code: "Conflict" });
  });
});

describe("guestNetworkOf()", () => {
  it("takes the guest address and declared ports of a masquerade plan", () => {
    const plan = {
      name: "default",
      mac: "02:00:00:00:00:01",
      model: "virtio" as const,
      gateway: "10.0.2.1",
      guestIp: "10.0.2.2",
      prefixLength: 24,
      hostname: "vm",
      ports: [{ protocol: "tcp" as const, port: 22 }],
    };
    expect(guestNetworkOf(plan)).toEqual({
      interfaceName: "default",
      address: "10.0.2.2",
      ports: [{ protocol: "tcp", port: 22 }],
    });
  });
});
