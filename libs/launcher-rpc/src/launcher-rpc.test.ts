import { mkdtempSync, rmSync, statSync } from "node:fs";
import { request } from "node:http";
import { connect, createServer, type Server as NetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@kvt/observability";
import {
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ROOT_CONTEXT,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  type ConsoleEndpoint,
  type DomainInfo,
  EVENT_PING_INTERVAL_MS,
  isPodUid,
  KUBEVIRT_MIGRATION_DEFAULTS,
  LauncherClient,
  type LauncherEvent,
  LauncherRpcError,
  LauncherServer,
  type LauncherService,
  launcherSocketPath,
  type MigrateRequest,
  type MigrationTarget,
  type PortForwardEndpoint,
  type PrepareTargetRequest,
  podSocketPath,
  type SourceCertificateRequest,
  TIMEOUT_HEADER,
} from "./index.ts";

const logger = createLogger({ component: "test", level: "silent" });
/** PEM envelopes: the protocol checks the blocks, OpenSSL in the launcher parses them (tls_tests.cc). */
const pem = (label: string, body: string): string => `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`;
const TARGET_TLS = { certificate: pem("CERTIFICATE", "dGFyZ2V0"), key: pem("PRIVATE KEY", "a2V5LXQ=") };
const SOURCE_TLS = { certificate: pem("CERTIFICATE", "c291cmNl"), key: pem("PRIVATE KEY", "a2V5LXM=") };

class FakeService implements LauncherService {
  state: DomainInfo["state"] = "NoDomain";
  calls: string[] = [];
  lastMigrate: MigrateRequest | undefined;
  hang = false;
  traceIds: (string | undefined)[] = [];
  info(): DomainInfo {
    this.traceIds.push(trace.getSpanContext(context.active())?.traceId);
    return {
      protocolVersion: "v1",
      vmi: { namespace: "default", name: "vm1", uid: "uid-1" },
      pod: { name: "virt-launcher-vm1-abcde" },
      pid: process.pid,
      state: this.state,
    };
  }
  async sync(): Promise<DomainInfo> {
    this.calls.push("sync");
    this.state = "Running";
    return this.info();
  }
  async pause(signal: AbortSignal): Promise<void> {
    if (this.hang) await new Promise((resolve) => signal.addEventListener("abort", resolve));
    if (this.state !== "Running") throw new LauncherRpcError("Conflict", `cannot pause a ${this.state} domain`);
    this.state = "Paused";
  }
  async unpause(): Promise<void> {
    this.state = "Running";
  }
  async softReboot(): Promise<void> {
    this.calls.push("softreboot");
  }
  async shutdown(request: { gracePeriodSeconds: number }): Promise<void> {
    this.calls.push(`shutdown ${request.gracePeriodSeconds}`);
    this.state = "Shutdown";
  }
  async kill(): Promise<void> {
    throw new Error("boom");
  }
  lastPrepare?: PrepareTargetRequest;
  async prepareTarget(request: PrepareTargetRequest): Promise<MigrationTarget> {
    this.lastPrepare = request;
    return {
      host: "127.0.0.1",
      port: 40000,
      secret: "s3cret",
      ...(request.tls ? { certificate: request.tls.certificate } : {}),
    };
  }
  lastSourceCertificate?: SourceCertificateRequest;
  async sourceCertificate(request: SourceCertificateRequest): Promise<void> {
    this.lastSourceCertificate = request;
  }
  async migrate(request: MigrateRequest): Promise<void> {
    this.lastMigrate = request;
  }
  async cancelMigration(): Promise<void> {}
  async stats(): Promise<{
    state: DomainInfo["state"];
    vcpuSeconds: number[];
    memoryBytes: number;
    launcherRssBytes: number;
  }> {
    return { state: this.state, vcpuSeconds: [0.5], memoryBytes: 64 << 20, launcherRssBytes: 1 };
  }
}

class FakeConsole implements ConsoleEndpoint {
  input: string[] = [];
  readonly listeners = new Set<(chunk: Uint8Array) => void>();
  scrollback(): Uint8Array {
    return new TextEncoder().encode("boot log\n");
  }
  write(data: Uint8Array): void {
    const text = new TextDecoder().decode(data);
    this.input.push(text);
    for (const l of this.listeners) l(new TextEncoder().encode(`echo:${text}`));
  }
  subscribe(listener: (chunk: Uint8Array) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

let dir: string;
let service: FakeService;
let consoleEndpoint: FakeConsole;
let server: LauncherServer;
let client: LauncherClient;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "lrpc-"));
  service = new FakeService();
  consoleEndpoint = new FakeConsole();
  const socketPath = launcherSocketPath(dir, "pod-uid-1");
  server = new LauncherServer({ socketPath, service, console: consoleEndpoint, logger });
  await server.listen();
  client = new LauncherClient(socketPath, { timeoutMs: 2000 });
});

afterEach(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

function rawPost(
  path: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: client.socketPath, path, method: "POST", headers, agent: false }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => {
        text += c.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("launcher-rpc over a unix socket", () => {
  it("the socket is its owner's only (0600): it controls a guest", () => {
    const st = statSync(client.socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
  });

  it("sync boots the domain and info reports it", async () => {
    expect((await client.info()).state).toBe("NoDomain");
    const info = await client.sync({ vmi: { metadata: { name: "vm1" } } });
    expect(info.state).toBe("Running");
    expect(service.calls).toEqual(["sync"]);
  });

  it("a command in the wrong state is a Conflict with the service's message", async () => {
    const error = await client.pause().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LauncherRpcError);
    expect((error as LauncherRpcError).code).toBe("Conflict");
    expect((error as LauncherRpcError).message).toContain("cannot pause a NoDomain domain");
  });

  it("an unexpected service failure is an Internal error, and the server keeps serving", async () => {
    await expect(client.kill()).rejects.toMatchObject({ code: "Internal" });
    expect((await client.info()).state).toBe("NoDomain");
  });

  it("shutdown carries the grace period; migrate is accepted with its options", async () => {
    await client.shutdown({ gracePeriodSeconds: 7 });
    expect(service.calls).toContain("shutdown 7");
    const target = await client.prepareTarget({ migrationUid: "m1", tls: TARGET_TLS });
    expect(target).toEqual({ host: "127.0.0.1", port: 40000, secret: "s3cret", certificate: TARGET_TLS.certificate });
    const options = KUBEVIRT_MIGRATION_DEFAULTS;
    await client.migrate({ migrationUid: "m1", target, options, tls: SOURCE_TLS });
    expect(service.lastMigrate).toEqual({ migrationUid: "m1", target, options, tls: SOURCE_TLS });
    const { certificate: _c, ...plainTarget } = target;
    await client.migrate({ migrationUid: "m1", target: plainTarget, options: { ...options, disableTLS: true } });
    expect(service.lastMigrate?.options.disableTLS).toBe(true);
    expect(service.lastMigrate?.tls).toBeUndefined();
    await client.sourceCertificate({ migrationUid: "m1", certificate: SOURCE_TLS.certificate });
    expect(service.lastSourceCertificate).toEqual({ migrationUid: "m1", certificate: SOURCE_TLS.certificate });
  });

  it("requires each side's TLS material unless migrations.disableTLS is set, and PEM where PEM belongs", async () => {
    const options = KUBEVIRT_MIGRATION_DEFAULTS;
    const target = { host: "127.0.0.1", port: 40000, secret: "s3cret", certificate: TARGET_TLS.certificate };
    const { certificate: _c, ...plainTarget } = target;
    const refusals: [Promise<unknown>, RegExp][] = [
      [
        client.prepareTarget({ migrationUid: "m1" }),
        /prepare-target request.tls is required unless KubeVirt's migrations.disableTLS/,
      ],
      [client.migrate({ migrationUid: "m1", target, options }), /migrate request.tls is required unless/],
      [
        client.migrate({ migrationUid: "m1", target: plainTarget, options, tls: SOURCE_TLS }),
        /migrate request.target.certificate is required/,
      ],
      [
        client.prepareTarget({ migrationUid: "m1", tls: { ...TARGET_TLS, key: TARGET_TLS.certificate } }),
        /tls.key must be a PEM private key/,
      ],
      [
        client.sourceCertificate({ migrationUid: "m1", certificate: "MIIB..." }),
        /certificate must be a PEM certificate/,
      ],
    ];
    for (const [call, why] of refusals)
      await expect(call).rejects.toMatchObject({ code: "BadRequest", message: expect.stringMatching(why) });
    expect(service.lastMigrate).toBeUndefined();
    expect(service.lastSourceCertificate).toBeUndefined();
  });

  it("prepare-target reads KubeVirt's migrations.disableTLS from the VMI's migrationState", async () => {
    const vmi = (disableTLS: boolean) => ({
      metadata: { name: "v" },
      status: { migrationState: { migrationUid: "m1", migrationConfiguration: { disableTLS } } },
    });
    await client.prepareTarget({ migrationUid: "m1", vmi: vmi(true) });
    expect(service.lastPrepare?.disableTLS).toBe(true);
    await client.prepareTarget({ migrationUid: "m1", vmi: vmi(false), tls: TARGET_TLS });
    expect(service.lastPrepare?.disableTLS).toBeUndefined();
    expect(service.lastPrepare?.tls).toEqual(TARGET_TLS);
    await client.prepareTarget({ migrationUid: "m1", tls: TARGET_TLS });
    expect(service.lastPrepare?.disableTLS).toBeUndefined();
    await client.prepareTarget({ migrationUid: "m1", disableTLS: true }); // said outright
    expect(service.lastPrepare?.disableTLS).toBe(true);
  });

  it.each([
    ["not JSON", "{", "BadRequest"],
    ["a missing grace period", "{}", "BadRequest"],
    ["a negative grace period", '{"gracePeriodSeconds":-1}', "BadRequest"],
    ["an array", "[]", "BadRequest"],
  ])("shutdown with %s is rejected as %s", async (_what, body, code) => {
    const res = await rawPost("/v1/shutdown", body, { [TIMEOUT_HEADER]: "1000", "content-type": "application/json" });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code } });
    expect(service.calls).toEqual([]);
  });

  it("a request without a deadline is refused", async () => {
    const res = await rawPost("/v1/pause", "{}", {});
    expect(res.status).toBe(400);
    expect(res.body).toContain(TIMEOUT_HEADER);
  });

  it("a command past its deadline answers DeadlineExceeded and the service sees the abort", async () => {
    await client.sync();
    service.hang = true;
    await expect(client.pause({ timeoutMs: 200 })).rejects.toMatchObject({ code: "DeadlineExceeded" });
  });

  it("an unknown version or path is NotFound", async () => {
    const res = await rawPost("/v2/sync", "{}", { [TIMEOUT_HEADER]: "1000" });
    expect(res.status).toBe(404);
  });

  it("a socket nobody listens on is Unavailable", async () => {
    const nobody = new LauncherClient(join(dir, "launcher-none.sock"));
    await expect(nobody.info()).rejects.toMatchObject({ code: "Unavailable" });
  });

  it("the event stream starts with a snapshot and carries published events in order", async () => {
    const events: LauncherEvent[] = [];
    const abort = new AbortController();
    const done = client.watchEvents((event) => {
      events.push(event);
      if (event.type === "domain" && event.transition === "snapshot") {
        server.publish({ type: "domain", transition: "started", info: { ...service.info(), state: "Running" } });
        server.publish({
          type: "migration-result",
          migrationUid: "m1",
          result: { ok: true, downtimeMs: 3, totalSeconds: 1, bytesSent: 10, iterations: 2 },
        });
      }
      if (event.type === "migration-result") abort.abort();
    }, abort.signal);
    await done;
    expect(events.map((e) => e.type)).toEqual(["domain", "domain", "migration-result"]);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(events[1]).toMatchObject({ transition: "started", info: { state: "Running" } });
  });

  it("an event stream the launcher accepts but never answers fails as Unavailable after three ping intervals", async () => {
    // A launcher whose event loop is blocked: the kernel accepts the connection, nothing answers.
    const mute = join(dir, "launcher-mute.sock");
    const held: Socket[] = [];
    const silent = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(mute, resolve));
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const done = new LauncherClient(mute).watchEvents(() => {});
      const outcome = done.then(
        () => "resolved",
        (error: unknown) => error,
      );
      await expect.poll(() => held.length, { interval: 5 }).toBe(1);
      vi.advanceTimersByTime(EVENT_PING_INTERVAL_MS * 3 + 1);
      expect(await outcome).toMatchObject({ code: "Unavailable", message: expect.stringMatching(/no answer/) });
    } finally {
      vi.useRealTimers();
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("the event stream ends when the launcher closes", async () => {
    let snapshot = false;
    const done = client.watchEvents((event) => {
      if (event.type === "domain") snapshot = true;
    });
    await expect.poll(() => server.subscriberCount).toBe(1);
    await server.close();
    await done;
    expect(snapshot).toBe(true);
    await server.listen(); // afterEach closes it again
  });

  it("the console replays the scrollback, then carries bytes both ways", async () => {
    const stream = await client.openConsole();
    let received = "";
    stream.on("data", (chunk: Buffer) => {
      received += chunk.toString();
    });
    await expect.poll(() => received).toBe("boot log\n");
    stream.write("ls\n");
    await expect.poll(() => received).toBe("boot log\necho:ls\n");
    expect(consoleEndpoint.input).toEqual(["ls\n"]);
    stream.destroy();
    await expect.poll(() => consoleEndpoint.listeners.size).toBe(0);
  });

  it("polls (info, stats) make spans only inside a caller's trace; commands always do", async () => {
    const started: string[] = [];
    // Records span names; the spans themselves behave like the API's no-op ones (the parent's context, if any).
    const recording = {
      startSpan: (name: string, _options?: unknown, ctx?: Context) => {
        started.push(name);
        return trace.wrapSpanContext(trace.getSpanContext(ctx ?? context.active()) ?? INVALID_SPAN_CONTEXT);
      },
    } as unknown as Tracer;
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider({ getTracer: () => recording });
    try {
      await client.info();
      await client.stats();
      expect(started).toEqual([]);
      await client.sync();
      expect(started).toEqual(["launcher-rpc sync", "launcher sync"]);
      started.length = 0;
      const parent = trace.setSpanContext(ROOT_CONTEXT, {
        traceId: "0af7651916cd43dd8448eb211c80319c",
        spanId: "b7ad6b7169203331",
        traceFlags: 1,
      });
      await context.with(parent, () => client.stats());
      expect(started).toEqual(["launcher-rpc stats", "launcher stats"]);
    } finally {
      trace.disable();
      context.disable();
      propagation.disable();
    }
  });

  it("the caller's trace context reaches the service through traceparent", async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    try {
      const traceId = "0af7651916cd43dd8448eb211c80319c";
      const parent = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: "b7ad6b7169203331", traceFlags: 1 });
      await context.with(parent, () => client.info());
      expect(service.traceIds.at(-1)).toBe(traceId);
    } finally {
      context.disable();
      propagation.disable();
    }
  });
});

describe("port-forward through the launcher", () => {
  let guest: NetServer;
  let guestPort: number;
  let pfServer: LauncherServer;
  let pfClient: LauncherClient;
  const dials: number[] = [];
  beforeEach(async () => {
    // The "guest": answers each line upper-cased; on the client's half-close it writes "bye" and ends.
    guest = createServer({ allowHalfOpen: true }, (socket: Socket) => {
      socket.on("data", (d: Buffer) => socket.write(d.toString().toUpperCase()));
      socket.on("end", () => socket.end("bye"));
    });
    await new Promise<void>((resolve) => guest.listen(0, "127.0.0.1", resolve));
    guestPort = (guest.address() as { port: number }).port;
    const endpoint: PortForwardEndpoint = {
      dial: (port) =>
        new Promise((resolve, reject) => {
          dials.push(port);
          if (port === 22) return reject(new LauncherRpcError("Conflict", "the VMI has no pod network interface"));
          const s = connect({ host: "127.0.0.1", port: guestPort, allowHalfOpen: true });
          s.once("connect", () => resolve(s));
          s.once("error", () => reject(new LauncherRpcError("Unavailable", "dial tcp: connection refused")));
        }),
    };
    pfServer = new LauncherServer({
      socketPath: launcherSocketPath(dir, "pod-uid-pf"),
      service,
      portForward: endpoint,
      logger,
    });
    await pfServer.listen();
    pfClient = new LauncherClient(launcherSocketPath(dir, "pod-uid-pf"), { timeoutMs: 2000 });
  });
  afterEach(async () => {
    await pfServer.close();
    await new Promise<void>((resolve) => guest.close(() => resolve()));
  });

  it("carries bytes both ways, and a half-close reaches the guest and back", async () => {
    const stream = await pfClient.openPortForward(8080, "tcp");
    let received = "";
    stream.on("data", (c: Buffer) => {
      received += c.toString();
    });
    const ended = new Promise<void>((resolve) => stream.once("end", resolve));
    stream.write("hello\n");
    await expect.poll(() => received).toBe("HELLO\n");
    stream.end();
    await ended;
    expect(received).toBe("HELLO\nbye");
    expect(dials).toContain(8080);
    stream.destroy();
  });

  it("a dial the endpoint refuses comes back with its code and message, before any upgrade", async () => {
    await expect(pfClient.openPortForward(22, "tcp")).rejects.toMatchObject({
      code: "Conflict",
      message: "the VMI has no pod network interface",
    });
  });

  it.each([
    ["/v1/portforward/0/tcp", 'invalid port "0"'],
    ["/v1/portforward/65536/tcp", 'invalid port "65536"'],
    ["/v1/portforward/x/tcp", 'invalid port "x"'],
    ["/v1/portforward/80/sctp", 'unsupported protocol "sctp"'],
    ["/v1/portforward/80", "expected /v1/portforward/{port}/{protocol}"],
  ])("a malformed path %s is a BadRequest (%s)", async (path, message) => {
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({
        socketPath: pfClient.socketPath,
        path,
        agent: false,
        headers: { connection: "Upgrade", upgrade: "kvt-portforward.v1" },
      });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c: Buffer) => {
          text += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on("upgrade", () => reject(new Error("upgraded")));
      req.on("error", reject);
      req.end();
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: "BadRequest" } });
    expect(JSON.parse(answer.body).error.message).toContain(message);
  });

  it("a launcher without a port-forward endpoint answers Unavailable", async () => {
    await expect(client.openPortForward(80)).rejects.toMatchObject({ code: "Unavailable" });
  });

  it("closing the stream closes the guest's connection", async () => {
    const closed = new Promise<void>((resolve) => {
      guest.once("connection", (s: Socket) => s.once("close", () => resolve()));
    });
    const stream = await pfClient.openPortForward(8080);
    stream.destroy();
    await closed;
  });
});

describe("launcherSocketPath", () => {
  it("refuses keys that are not plain names", () => {
    expect(() => launcherSocketPath("/run", "../etc")).toThrow(RangeError);
    expect(launcherSocketPath("/run", "abc-1")).toBe("/run/launcher-abc-1.sock");
  });
});

describe("podSocketPath", () => {
  it("is the pod's sockets emptyDir under the kubelet's pods directory, as KubeVirt's SocketFilePathOnHost", () => {
    expect(podSocketPath("/pods", "6f0c2a1e-8d3b-4c55-9e0a-0123456789ab")).toBe(
      "/pods/6f0c2a1e-8d3b-4c55-9e0a-0123456789ab/volumes/kubernetes.io~empty-dir/sockets/launcher-sock",
    );
  });

  it("refuses a uid that would leave the pods directory", () => {
    for (const uid of ["..", "../x", "a/b", ""]) expect(() => podSocketPath("/pods", uid)).toThrow(RangeError);
    expect([isPodUid("abc-1"), isPodUid(".."), isPodUid(".tmp")]).toEqual([true, false, false]);
  });
});
