/**
 * virtctl's only way out: requests and WebSocket upgrades to the API server named by the kubeconfig, through
 * @kvt/kube's `RestClient` (and its kubeconfig loader, as kubectl resolves `--kubeconfig`, `$KUBECONFIG`,
 * `--context`, `-n` and `-s`). Plain object writes go to `/api` and `/apis/kubevirt.io`; actions go to the aggregated
 * `subresources.kubevirt.io` paths, which the API server proxies to virt-api. Non-2xx answers reject with
 * @kvt/kube's `ApiError` carrying the server's Status; socket, DNS and TLS failures become
 * {@link ConnectionError}s that say what to check.
 */
import {
  ApiError,
  answerStatus,
  type LoadedKubeConfig,
  RestClient,
  type RestRequest,
  type UpgradeTarget,
} from "@kvt/kube";
import WebSocket from "ws";
import { type ConnectionOrigin, toConnectionError } from "./connection-error.ts";

/** How long a request may wait for the server before it fails as a timeout. */
const REQUEST_TIMEOUT_MS = 60_000;

/** What commands use; tests pass fakes. */
export interface VirtClient {
  /** The namespace from `-n`, else the kubeconfig context's, else `default`. */
  readonly namespace: string;
  /** The server, kubeconfig files and context in use, for messages that say what to check. */
  readonly origin?: ConnectionOrigin;
  /**
   * Sends a request; resolves to the parsed JSON body (undefined when empty); rejects with an `ApiError`, or a
   * ConnectionError when the server cannot be reached.
   */
  request(req: RestRequest): Promise<unknown>;
  /**
   * Opens a WebSocket at `path` with `protocols`, paused (call `resume()` after adding listeners); rejects with an
   * `ApiError` when the upgrade is refused.
   */
  websocket(path: string, protocols: readonly string[]): Promise<WebSocket>;
}

/** {@link VirtClient} over @kvt/kube's RestClient, authenticated from `kubeConfig`. */
export class RestVirtClient implements VirtClient {
  readonly #rest: RestClient;
  readonly namespace: string;
  readonly origin: ConnectionOrigin;

  /** `namespace` (the `-n` flag) wins over the kubeconfig context's. */
  constructor(kubeConfig: LoadedKubeConfig, namespace?: string) {
    this.#rest = new RestClient(kubeConfig, { userAgent: "virtctl/kubevirt-ts", requestTimeoutMs: REQUEST_TIMEOUT_MS });
    this.namespace = namespace ?? kubeConfig.namespace ?? "default";
    this.origin = {
      server: this.#rest.server,
      kubeconfigFiles: kubeConfig.files,
      ...(kubeConfig.context ? { context: kubeConfig.context } : {}),
    };
  }

  async request(req: RestRequest): Promise<unknown> {
    try {
      return await this.#rest.request<unknown>(req);
    } catch (error) {
      throw toConnectionError(error as Error, this.origin);
    }
  }

  async websocket(path: string, protocols: readonly string[]): Promise<WebSocket> {
    let target: UpgradeTarget;
    try {
      target = await this.#rest.upgradeTarget(path);
    } catch (error) {
      throw toConnectionError(error as Error, this.origin);
    }
    const ws = new WebSocket(target.url, [...protocols], {
      ...target.options,
      // ws hands the headers to http.request, which sends a list (Impersonate-Group) as repeated headers.
      headers: target.headers as Record<string, string>,
      handshakeTimeout: 30_000,
    });
    return await new Promise<WebSocket>((resolve, reject) => {
      // Paused until the caller has attached its listeners, so no early frame (the guest's banner) is lost.
      ws.once("open", () => {
        ws.pause();
        resolve(ws);
      });
      ws.once("unexpected-response", (_req, res) => {
        const code = res.statusCode ?? 0;
        const refused = (text: string): ApiError => {
          const status = answerStatus(code, text);
          return new ApiError(`upgrade ${path}: ${status.message ?? ""}`, code, status);
        };
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => reject(refused(Buffer.concat(chunks).toString("utf8"))));
        res.on("error", () => reject(refused("")));
      });
      ws.once("error", (error) => reject(toConnectionError(error, this.origin)));
    });
  }
}
