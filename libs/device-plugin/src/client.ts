/**
 * Both clients of the API on unix sockets: the kubelet's client of a plugin (DevicePluginClient) and a plugin's
 * call to the kubelet's Registration service (register). Every unary call carries a deadline; failures are
 * {@link DevicePluginError}s naming the call and the socket.
 */
import { Client, credentials, type ServiceError, type StatusObject, status } from "@grpc/grpc-js";
import { method, services } from "./api.ts";
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

/** The deadline of a unary call unless the caller gives one (the kubelet's and KubeVirt's dial timeout). */
export const DEFAULT_TIMEOUT_MS = 5000;
/** The kubelet's deadline for PreStartContainer (KubeletPreStartContainerRPCTimeoutInSecs). */
export const PRE_START_CONTAINER_TIMEOUT_MS = 30_000;

/** An open ListAndWatch stream. */
export interface DeviceWatch {
  /** Resolves when the stream ends: undefined when the plugin ended it (or cancel() did), else the error. */
  readonly ended: Promise<DevicePluginError | undefined>;
  cancel(): void;
}

/** A connection to one device plugin's socket. */
export class DevicePluginClient {
  readonly socketPath: string;
  readonly #client: Client;

  private constructor(socketPath: string) {
    this.socketPath = socketPath;
    this.#client = new Client(`unix:${socketPath}`, credentials.createInsecure());
  }

  /** Dials the plugin at `socketPath`, waiting up to `timeoutMs` for the connection. */
  static async connect(socketPath: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<DevicePluginClient> {
    const client = new DevicePluginClient(socketPath);
    try {
      await waitForReady(client.#client, socketPath, timeoutMs);
    } catch (err) {
      client.close();
      throw err;
    }
    return client;
  }

  getDevicePluginOptions(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<DevicePluginOptions> {
    return this.#unary<Empty, DevicePluginOptions>("GetDevicePluginOptions", {}, timeoutMs);
  }

  getPreferredAllocation(
    request: PreferredAllocationRequest,
    timeoutMs = DEFAULT_TIMEOUT_MS,
  ): Promise<PreferredAllocationResponse> {
    return this.#unary("GetPreferredAllocation", request, timeoutMs);
  }

  allocate(request: AllocateRequest, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<AllocateResponse> {
    return this.#unary("Allocate", request, timeoutMs);
  }

  preStartContainer(
    request: PreStartContainerRequest,
    timeoutMs = PRE_START_CONTAINER_TIMEOUT_MS,
  ): Promise<PreStartContainerResponse> {
    return this.#unary("PreStartContainer", request, timeoutMs);
  }

  /** Opens ListAndWatch; `onResponse` gets every device list the plugin sends. */
  listAndWatch(onResponse: (response: ListAndWatchResponse) => void): DeviceWatch {
    const m = method<Empty, ListAndWatchResponse>(services().devicePlugin, "ListAndWatch");
    const call = this.#client.makeServerStreamRequest(m.path, m.requestSerialize, m.responseDeserialize, {});
    let cancelled = false;
    call.on("data", (response: ListAndWatchResponse) => onResponse(response));
    call.on("error", () => undefined); // the outcome is read from "status", which always follows
    const ended = new Promise<DevicePluginError | undefined>((resolve) => {
      call.on("status", (s: StatusObject) => {
        if (s.code === status.OK || (cancelled && s.code === status.CANCELLED)) resolve(undefined);
        else resolve(new DevicePluginError(`ListAndWatch on ${this.socketPath}: ${s.details}`, { code: s.code }));
      });
    });
    return {
      ended,
      cancel: () => {
        cancelled = true;
        call.cancel();
      },
    };
  }

  /** Closes the connection (an open ListAndWatch ends). */
  close(): void {
    this.#client.close();
  }

  #unary<Req, Res>(name: string, request: Req, timeoutMs: number): Promise<Res> {
    return unaryCall<Req, Res>(this.#client, services().devicePlugin, name, request, timeoutMs, this.socketPath);
  }
}

/** Registers a plugin with the kubelet whose Registration socket is `kubeletSocket`. */
export async function register(
  kubeletSocket: string,
  request: RegisterRequest,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<void> {
  const client = new Client(`unix:${kubeletSocket}`, credentials.createInsecure());
  try {
    await waitForReady(client, kubeletSocket, timeoutMs);
    await unaryCall<RegisterRequest, Empty>(
      client,
      services().registration,
      "Register",
      request,
      timeoutMs,
      kubeletSocket,
    );
  } finally {
    client.close();
  }
}

function waitForReady(client: Client, socketPath: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + timeoutMs, (err) =>
      err
        ? reject(
            new DevicePluginError(`cannot connect to ${socketPath} within ${timeoutMs} ms: ${err.message}`, {
              code: status.UNAVAILABLE,
              cause: err,
            }),
          )
        : resolve(),
    );
  });
}

function unaryCall<Req, Res>(
  client: Client,
  service: ReturnType<typeof services>["devicePlugin"],
  name: string,
  request: Req,
  timeoutMs: number,
  socketPath: string,
): Promise<Res> {
  const m = method<Req, Res>(service, name);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      request,
      { deadline: Date.now() + timeoutMs },
      (err: ServiceError | null, response?: Res) => {
        if (err)
          reject(new DevicePluginError(`${name} on ${socketPath}: ${err.details}`, { code: err.code, cause: err }));
        else resolve(response as Res);
      },
    );
  });
}
