/**
 * The HTTP `upgrade` event (WebSocket requests such as virtctl console): authenticate the request as every other
 * request is (auth/authenticate.ts: a token, or system:anonymous without credentials), then hand the socket to the
 * aggregated API that serves the path. Anything else is answered on the raw socket with a Status: 401 for
 * credentials that do not authenticate, 403 for a user RBAC refuses, 404 for a path nothing upgrades.
 *
 *   GET /apis/subresources.kubevirt.io/v1/namespaces/NS/virtualmachineinstances/NAME/console  (Upgrade: websocket)
 *     -> token -> user -> RBAC (get virtualmachineinstances/console) -> AggregatedGroup.upgrade() -> virt-api (101, then bytes both ways)
 */
import { type IncomingMessage, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { authenticateRequest } from "../auth/authenticate.ts";
import { authorizeRequest } from "../auth/authorize-request.ts";
import type { Authorizer } from "../auth/rbac.ts";
import { ApiError, statusError } from "../errors.ts";
import type { AggregatedApi, UserInfo } from "../http/server.ts";

/** An aggregated API that can relay upgrades. */
interface Upgradable extends AggregatedApi {
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, user: UserInfo): boolean | undefined;
}

const isUpgradable = (a: AggregatedApi): a is Upgradable => typeof (a as Partial<Upgradable>).upgrade === "function";

/** Writes a Status answer on a socket that was never upgraded, then closes it. */
export function refuseUpgrade(socket: Duplex, err: ApiError): void {
  const body = JSON.stringify(err.status);
  const text = STATUS_CODES[err.code] ?? "Error";
  socket.end(
    `HTTP/1.1 ${err.code} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** The server's `upgrade` listener and a way to close the relayed sockets (they outlive `server.close()`). */
export interface UpgradeHandler {
  readonly listener: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  closeAll(): void;
}

/** Creates the `upgrade` listener. */
export function upgradeHandler(
  tokens: ReadonlyMap<string, UserInfo>,
  aggregated: readonly AggregatedApi[],
  logger: Logger,
  authorizer: Authorizer,
): UpgradeHandler {
  const open = new Set<Duplex>();
  const listener = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
    socket.on("error", (err) => logger.debug({ err, url: req.url }, "upgrade socket error"));
    try {
      const authenticated = authenticateRequest(tokens, req);
      if (!authenticated) {
        refuseUpgrade(socket, statusError(401, "Unauthorized", "Unauthorized"));
        return;
      }
      const user = authorizeRequest(authorizer, authenticated, req, new URL(req.url ?? "/", "http://localhost"));
      const parts = (req.url ?? "/").split("?")[0]?.split("/") ?? [];
      const api =
        parts[1] === "apis"
          ? aggregated.find((a) => a.group === parts[2] && a.versions.includes(parts[3] ?? ""))
          : undefined;
      if (api && isUpgradable(api) && api.upgrade(req, socket, head, user) !== false) return;
      refuseUpgrade(socket, statusError(404, "NotFound", "the server could not find the requested resource"));
    } catch (err) {
      if (err instanceof ApiError) {
        refuseUpgrade(socket, err);
        return;
      }
      logger.error({ err, url: req.url }, "upgrade failed");
      refuseUpgrade(socket, statusError(500, "InternalError", `Internal error occurred: ${(err as Error).message}`));
    }
  };
  return {
    listener,
    closeAll: () => {
      for (const s of open) s.destroy();
    },
  };
}
