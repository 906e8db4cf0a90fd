import { once } from "node:events";
import { createServer } from "node:http";
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { closeServer, trackSockets } from "./close-server.ts";

describe("closeServer", () => {
  it("ends sockets the HTTP layer does not own (an upgraded one here), so the close resolves", async () => {
    const server = createServer();
    const sockets = trackSockets(server);
    server.on("upgrade", (_req, socket) => socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const client = connect((server.address() as AddressInfo).port, "127.0.0.1");
    client.on("error", () => {});
    client.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n");
    await once(client, "data");
    expect(sockets.size).toBe(1);
    const ended = once(client, "close");
    expect(await closeServer(server, sockets, 50)).toBe(1);
    await ended;
    expect(sockets.size).toBe(0);
  });

  it("leaves nothing to destroy when every connection closes by itself", async () => {
    const server = createTcpServer((s: Socket) => s.end());
    const sockets = trackSockets(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const client = connect((server.address() as AddressInfo).port, "127.0.0.1");
    await once(client, "close");
    expect(await closeServer(server, sockets, 50)).toBe(0);
  });
});
