/**
 * Both servers of the API on unix sockets: a plugin's DevicePlugin service and the kubelet's Registration service.
 * The socket is the API's only access control, as on a real node: it is created mode 0600 in a directory only its
 * owner may enter (the kubelet's device plugins dir is root's), so a peer that can connect is the node's own root.
 * Handler errors reach the peer as gRPC statuses (a {@link DevicePluginError}'s code, else UNKNOWN with the message).
 */
import { chmodSync, lstatSync, rmSync } from "node:fs";
import {
  type handleServerStreamingCall,
  type handleUnaryCall,
  Server,
  ServerCredentials,
  type ServerErrorResponse,
  status,
} from "@grpc/grpc-js";
import { services } from "./api.ts";
import { DevicePluginError } from "./errors.ts";
import type {
  AllocateRequest,
  AllocateResponse,
  DevicePluginOptions,
  Empty,
  ListAndWatchResponse,
  PreferredAllocationRequest,
  PreferredAllocationResponse,
  PreStartContainerRequest,
  PreStartContainerResponse,
  RegisterRequest,
} from "./protocol.ts";

/** What a device plugin implements (the DevicePlugin service). */
export interface DevicePluginService {
  getDevicePluginOptions(): Promise<DevicePluginOptions> | DevicePluginOptions;
  /**
   * Streams the device list: `send` the whole list first and again on every change; resolve to end the stream.
   * `signal` aborts when the kubelet goes away or the server closes.
   */
  listAndWatch(send: (response: ListAndWatchResponse) => void, signal: AbortSignal): Promise<void>;
  getPreferredAllocation(request: PreferredAllocationRequest): Promise<PreferredAllocationResponse>;
  allocate(request: AllocateRequest): Promise<AllocateResponse>;
  preStartContainer(request: PreStartContainerRequest): Promise<PreStartContainerResponse>;
}

/** What a kubelet implements (the Registration service): reject to refuse the plugin. */
export type RegisterHandler = (request: RegisterRequest) => Promise<void>;

/** A gRPC server on a unix socket. */
export interface UnixGrpcServer {
  readonly socketPath: string;
  /** Stops serving (open streams are cancelled after `graceMs`) and removes the socket. */
  close(graceMs?: number): Promise<void>;
}

/** Serves `plugin` on `socketPath` (a stale socket there is replaced). */
export function serveDevicePlugin(socketPath: string, plugin: DevicePluginService): Promise<UnixGrpcServer> {
  return listenUnix(socketPath, (server) =>
    server.addService(services().devicePlugin, {
      GetDevicePluginOptions: unary<Empty, DevicePluginOptions>(() => plugin.getDevicePluginOptions()),
      ListAndWatch: listAndWatchHandler(plugin),
      GetPreferredAllocation: unary((r: PreferredAllocationRequest) => plugin.getPreferredAllocation(r)),
      Allocate: unary((r: AllocateRequest) => plugin.allocate(r)),
      PreStartContainer: unary((r: PreStartContainerRequest) => plugin.preStartContainer(r)),
    }),
  );
}

/** Serves the kubelet's Registration service on `socketPath` (a stale socket there is replaced). */
export function serveRegistration(socketPath: string, register: RegisterHandler): Promise<UnixGrpcServer> {
  return listenUnix(socketPath, (server) =>
    server.addService(services().registration, {
      Register: unary<RegisterRequest, Empty>(async (r) => {
        await register(r);
        return {};
      }),
    }),
  );
}

function unary<Req, Res>(fn: (request: Req) => Promise<Res> | Res): handleUnaryCall<Req, Res> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => fn(call.request))
      .then(
        (response) => callback(null, response),
        (err: unknown) => callback(toServiceError(err)),
      );
  };
}

function listAndWatchHandler(plugin: DevicePluginService): handleServerStreamingCall<Empty, ListAndWatchResponse> {
  return (call) => {
    const aborted = new AbortController();
    call.on("cancelled", () => aborted.abort());
    call.on("close", () => aborted.abort());
    const send = (response: ListAndWatchResponse): void => {
      if (!aborted.signal.aborted && !call.cancelled) call.write(response);
    };
    plugin.listAndWatch(send, aborted.signal).then(
      () => {
        if (!call.cancelled) call.end();
      },
      (err: unknown) => {
        if (!call.cancelled) call.emit("error", toServiceError(err));
      },
    );
  };
}

function toServiceError(err: unknown): ServerErrorResponse {
  const message = err instanceof Error ? err.message : String(err);
  const code = err instanceof DevicePluginError ? err.code : status.UNKNOWN;
  return { name: "DevicePluginError", message, code, details: message };
}

async function listenUnix(socketPath: string, add: (server: Server) => void): Promise<UnixGrpcServer> {
  removeStaleSocket(socketPath);
  const server = new Server();
  add(server);
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix:${socketPath}`, ServerCredentials.createInsecure(), (err) =>
      err ? reject(new DevicePluginError(`cannot serve on ${socketPath}: ${err.message}`, { cause: err })) : resolve(),
    );
  });
  chmodSync(socketPath, 0o600);
  let closing: Promise<void> | undefined;
  return {
    socketPath,
    close(graceMs = 1000) {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => server.forceShutdown(), graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      return closing;
    },
  };
}

/** Removes a socket left at `path` by an earlier process; refuses to replace anything that is not a socket. */
function removeStaleSocket(path: string): void {
  let kind: ReturnType<typeof lstatSync> | undefined;
  try {
    kind = lstatSync(path);
  } catch {
    return; // nothing there
  }
  if (!kind.isSocket()) throw new DevicePluginError(`cannot serve on ${path}: it exists and is not a socket`);
  rmSync(path, { force: true });
}
