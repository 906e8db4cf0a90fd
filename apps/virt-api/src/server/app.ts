/**
 * virt-api's request handling: identity, routing, bodies and Status answers for the webhooks, discovery and the
 * subresources, plus the console and port-forward WebSocket upgrades. Transport-agnostic: {@link startVirtApiServer} mounts it on
 * HTTPS; tests mount it on any node:http(s) server.
 *
 *   request -> route() -> identity (X-Remote-* via requestheader client cert, or virt-api's own)
 *           -> webhook | discovery | version | VM lifecycle | VMI action | console, portforward (upgrade)
 *           -> 2xx body, or a v1 Status with KubeVirt's code and message
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ApiError, badRequest, internalError, notFound, statusError, unauthorized } from "@kvt/kube";
import { contextFromTraceparent, type Logger, traceparentOf } from "@kvt/observability";
import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { WebSocketServer } from "ws";
import { CONSOLE_SUBPROTOCOL, type HandlerClient } from "../handler/handler-client.ts";
import type { ClusterClient } from "../kube/cluster-client.ts";
import { apiGroup, apiGroupList, apiResourceList, versionInfo } from "../subresources/discovery.ts";
import { expandPostedVm, expandStoredVm } from "../subresources/expand-spec.ts";
import { fetchVmi } from "../subresources/fetch-target.ts";
import { openPortForward } from "../subresources/port-forward.ts";
import { migrateVm, restartVm, startVm, stopVm } from "../subresources/vm-lifecycle.ts";
import { guestOsInfo, pauseVmi, softRebootVmi, unpauseVmi, validateConsole } from "../subresources/vmi-actions.ts";
import { type Admitter, BadReviewError, parseReview, reviewResponse } from "../webhooks/admission.ts";
import type { InstancetypeReader } from "../webhooks/instancetype-admitters.ts";
import { callerIdentity, IdentityError, type RequestHeaderAuth, type UserInfo } from "./identity.ts";
import { MAX_ADMISSION_REVIEW_BYTES, readJson } from "./json-body.ts";
import { optionsProblem } from "./options-decode.ts";
import { type Route, route } from "./routes.ts";
import { relayWebSockets } from "./websocket-relay.ts";

/** What the app needs; the composition root wires real clients, tests wire fakes. */
export interface VirtApiDeps {
  readonly logger: Logger;
  /** A client acting as `user`, or as virt-api itself when `user` is undefined. */
  readonly clientFor: (user: UserInfo | undefined) => ClusterClient;
  /**
   * A client acting as virt-api's service account (kubevirt-apiserver), for KubeVirt's internal VMI grace-period
   * patch of a forced stop/restart; without it that patch is made as the caller (and the VMI webhook refuses it).
   */
  readonly internalClient?: ClusterClient;
  readonly handler: HandlerClient;
  /** Webhook path -> admitter. */
  readonly webhooks: Readonly<Record<string, Admitter>>;
  /** Reads instancetypes and preferences (as virt-api) for the expand-spec subresources; without it they answer 404. */
  readonly instancetypes?: InstancetypeReader;
  /** When set, X-Remote-* identity is required and trusted only from a verified proxy certificate. */
  readonly requestHeaderAuth?: RequestHeaderAuth;
  /** Reported by the `version` subresource. */
  readonly version: string;
  /** Console session accounting (metrics); optional. */
  readonly consoleSessions?: ConsoleSessionObserver;
  /** Port-forward tunnel accounting (`kubevirt_portforward_active_tunnels`); optional. */
  readonly portForwardTunnels?: ConsoleSessionObserver;
  /** Request accounting (metrics); optional. */
  readonly requests?: RequestObserver;
}

/** Told the outcome of each plain request (e.g. `kubevirt_virt_api_requests_total`). */
export interface RequestObserver {
  /** `handler` is bounded: a webhook path, `vm/<action>`, `vmi/<action>` or the route kind. */
  handled(handler: string, code: number): void;
}

const tracer = trace.getTracer("virt-api");

/** The bounded handler name of a route (metric label and span name). */
function handlerOf(r: Route): string {
  if (r.kind === "webhook") return r.path;
  if (r.kind === "vm" || r.kind === "vmi") return `${r.kind}/${r.action}`;
  return r.kind;
}

/** Told when console sessions (or port-forward tunnels) open and close (e.g. `kubevirt_console_active_connections`). */
export interface ConsoleSessionObserver {
  opened(namespace: string, name: string): void;
  closed(namespace: string, name: string): void;
}

function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

/** Answers with `error`'s Status. */
function sendError(res: ServerResponse, error: ApiError): void {
  sendJson(res, error.code, error.status);
}

/** 404 for a path no route serves. */
function pathNotFound(path: string): ApiError {
  return statusError(404, "NotFound", `the server could not find the requested resource: ${path}`);
}

/** 405 for a method the path's route does not take. */
function methodNotAllowed(method: string, path: string): ApiError {
  const message = `the server does not allow this method on the requested resource: ${method} ${path}`;
  return statusError(405, "MethodNotAllowed", message);
}

function options<T>(body: unknown, action: string): T {
  if (body === undefined) return {} as T;
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw badRequest("Can not unmarshal Request body to struct, error: expected a JSON object");
  }
  const problem = optionsProblem(action, body as Record<string, unknown>);
  if (problem) throw badRequest(problem);
  return body as T;
}

/** The virt-api HTTP application. */
export class VirtApiApp {
  readonly #deps: VirtApiDeps;
  readonly #webhookPaths: ReadonlySet<string>;
  #draining = false;
  readonly #wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (p) => (p.has(CONSOLE_SUBPROTOCOL) ? CONSOLE_SUBPROTOCOL : false),
  });

  constructor(deps: VirtApiDeps) {
    this.#deps = deps;
    this.#webhookPaths = new Set(Object.keys(deps.webhooks));
  }

  /** Handles one plain HTTP request; never throws. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "https://virt-api");
    const r = route(req.method ?? "GET", url.pathname, this.#webhookPaths);
    const handler = handlerOf(r);
    // Subresource calls are spans (their trace continues in the objects they write, e.g. a migration's VMIM);
    // webhooks and discovery are not traced (too frequent, no object of their own).
    if (r.kind !== "vm" && r.kind !== "vmi") {
      await this.#handle(r, req, res);
      this.#deps.requests?.handled(handler, res.statusCode);
      return;
    }
    const header = req.headers.traceparent;
    const parent = contextFromTraceparent(typeof header === "string" ? header : undefined);
    const span = tracer.startSpan(
      `${r.action} ${r.kind === "vm" ? "VirtualMachine" : "VirtualMachineInstance"}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "http.request.method": req.method ?? "GET",
          "k8s.namespace.name": r.namespace,
          [r.kind === "vm" ? "kubevirt.vm.name" : "kubevirt.vmi.name"]: r.name,
        },
      },
      parent,
    );
    try {
      await context.with(trace.setSpan(parent, span), () => this.#handle(r, req, res));
    } finally {
      span.setAttribute("http.response.status_code", res.statusCode);
      if (res.statusCode >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      this.#deps.requests?.handled(handler, res.statusCode);
    }
  }

  async #handle(r: Route, req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await this.#dispatch(r, req, res);
    } catch (error) {
      const failure = this.#toApiError(error, r);
      if (!res.headersSent) sendError(res, failure);
      else res.destroy();
    }
  }

  #toApiError(error: unknown, r: Route): ApiError {
    if (error instanceof ApiError) return error;
    if (error instanceof IdentityError) return unauthorized(error.message);
    if (error instanceof BadReviewError) return badRequest(error.message);
    this.#deps.logger.error({ err: error, route: r.kind }, "request failed");
    return internalError((error as Error).message);
  }

  async #dispatch(r: Route, req: IncomingMessage, res: ServerResponse): Promise<void> {
    switch (r.kind) {
      case "notFound":
        return sendError(res, pathNotFound(req.url ?? ""));
      case "methodNotAllowed":
        return sendError(res, methodNotAllowed(req.method ?? "", req.url ?? ""));
      case "healthz":
        return this.#healthz(res);
      case "discovery":
        return sendJson(
          res,
          200,
          r.doc === "groupList" ? apiGroupList() : r.doc === "group" ? apiGroup() : apiResourceList(r.version ?? "v1"),
        );
      case "version":
        return sendJson(res, 200, versionInfo(`v${this.#deps.version}`, `node ${process.versions.node}`));
      case "webhook":
        return this.#webhook(r.path, req, res);
      case "vm":
        return this.#vm(r, req, res);
      case "vmi":
        if (r.action === "console") return sendError(res, badRequest("the console requires a WebSocket upgrade"));
        return this.#vmi(r, req, res);
      case "portForward":
        return sendError(res, badRequest("portforward requires a WebSocket upgrade"));
      case "expandSpec":
      case "expandVmSpec":
        return this.#expand(r, req, res);
    }
  }

  /** The expand-spec subresources: the VM (stored, or the body's) with its instancetype and preference applied. */
  async #expand(
    r: Extract<Route, { kind: "expandSpec" | "expandVmSpec" }>,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const reader = this.#deps.instancetypes;
    if (!reader) return sendError(res, pathNotFound(req.url ?? ""));
    const user = callerIdentity(req, this.#deps.requestHeaderAuth);
    if (r.kind === "expandVmSpec")
      return sendJson(res, 200, await expandPostedVm(reader, await readJson(req), r.namespace));
    const vm = await this.#deps.clientFor(user).getVm(r.namespace, r.name);
    if (!vm) return sendError(res, notFound({ group: "kubevirt.io", resource: "virtualmachines" }, r.name));
    return sendJson(res, 200, await expandStoredVm(reader, vm));
  }

  async #webhook(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const contentType = req.headers["content-type"] ?? "";
    if (!contentType.startsWith("application/json")) {
      throw badRequest(`contentType=${contentType}, expect application/json`);
    }
    const review = parseReview(await readJson(req, MAX_ADMISSION_REVIEW_BYTES));
    const admitter = this.#deps.webhooks[path];
    if (!admitter) throw pathNotFound(path);
    const result = await admitter(review);
    if (!result.allowed) {
      this.#deps.logger.info(
        { webhook: path, kind: review.kind.kind, namespace: review.namespace, name: review.name },
        "admission denied",
      );
    }
    sendJson(res, 200, reviewResponse(review, result));
  }

  async #vm(r: Extract<Route, { kind: "vm" }>, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const user = callerIdentity(req, this.#deps.requestHeaderAuth);
    const body = await readJson(req);
    const t = {
      client: this.#deps.clientFor(user),
      ...(this.#deps.internalClient ? { internal: this.#deps.internalClient } : {}),
      namespace: r.namespace,
      name: r.name,
    };
    const log = this.#deps.logger.child({
      kind: "VirtualMachine",
      namespace: r.namespace,
      name: r.name,
      user: user?.username,
    });
    if (r.action === "start") await startVm(t, options(body, r.action));
    else if (r.action === "stop") await stopVm(t, options(body, r.action));
    else if (r.action === "restart") await restartVm(t, options(body, r.action));
    else {
      // The VMIM carries this request's span as its parent: the whole migration joins this trace.
      const traceparent = traceparentOf() ?? req.headers.traceparent;
      await migrateVm(
        t,
        options(body, r.action),
        typeof traceparent === "string" ? { "kubevirt.io/traceparent": traceparent } : undefined,
      );
    }
    log.info({ action: r.action }, "subresource request accepted");
    res.writeHead(202);
    res.end();
  }

  async #vmi(r: Extract<Route, { kind: "vmi" }>, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const user = callerIdentity(req, this.#deps.requestHeaderAuth);
    const body = await readJson(req);
    const t = { client: this.#deps.clientFor(user), handler: this.#deps.handler, namespace: r.namespace, name: r.name };
    if (r.action === "guestosinfo") return sendJson(res, 200, await guestOsInfo(t));
    if (r.action === "pause") await pauseVmi(t, options(body, r.action));
    else if (r.action === "unpause") await unpauseVmi(t, options(body, r.action));
    else await softRebootVmi(t);
    this.#deps.logger.info(
      { kind: "VirtualMachineInstance", namespace: r.namespace, name: r.name, action: r.action },
      "subresource request done",
    );
    res.writeHead(200);
    res.end();
  }

  /** Handles an HTTP upgrade (console, portforward); answers errors as Statuses on the raw socket. Never throws. */
  async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on("error", () => socket.destroy());
    const url = new URL(req.url ?? "/", "https://virt-api");
    const r = route(req.method ?? "GET", url.pathname, this.#webhookPaths);
    try {
      if (r.kind === "portForward") await this.#portForward(r, req, socket, head);
      else if (r.kind === "vmi" && r.action === "console") await this.#console(r, req, socket, head);
      else throw pathNotFound(url.pathname);
    } catch (error) {
      const failure = this.#toApiError(error, r);
      const text = JSON.stringify(failure.status);
      socket.end(
        `HTTP/1.1 ${failure.code} ${failure.reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
    }
  }

  async #console(
    r: Extract<Route, { kind: "vmi" }>,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): Promise<void> {
    const user = callerIdentity(req, this.#deps.requestHeaderAuth);
    const vmi = await fetchVmi({ client: this.#deps.clientFor(user), namespace: r.namespace, name: r.name });
    const refusal = validateConsole(vmi);
    if (refusal) throw refusal;
    let upstream: import("ws").WebSocket;
    try {
      upstream = await this.#deps.handler.console(vmi);
    } catch (error) {
      throw internalError((error as Error).message);
    }
    let upgraded = false;
    socket.once("close", () => {
      if (!upgraded) upstream.close();
    });
    this.#wss.handleUpgrade(req, socket, head, (client) => {
      upgraded = true;
      this.#deps.consoleSessions?.opened(r.namespace, r.name);
      let counted = true;
      this.#deps.logger.info(
        { kind: "VirtualMachineInstance", namespace: r.namespace, name: r.name },
        "console connected",
      );
      client.on("message", (data, isBinary) => upstream.send(data, { binary: isBinary }));
      upstream.on("message", (data, isBinary) => client.send(data, { binary: isBinary }));
      const closeBoth = (): void => {
        if (counted) this.#deps.consoleSessions?.closed(r.namespace, r.name);
        counted = false;
        client.close();
        upstream.close();
      };
      client.on("close", closeBoth);
      upstream.on("close", closeBoth);
      client.on("error", closeBoth);
      upstream.on("error", closeBoth);
      upstream.resume();
    });
  }

  /** The portforward subresource: the guest's port is connected first, then the caller's WebSocket accepted. */
  async #portForward(
    r: Extract<Route, { kind: "portForward" }>,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): Promise<void> {
    const user = callerIdentity(req, this.#deps.requestHeaderAuth);
    const tunnel = await openPortForward({ ...r, client: this.#deps.clientFor(user), handler: this.#deps.handler });
    const { upstream } = tunnel;
    if (socket.destroyed) {
      upstream.terminate(); // the caller left while the guest's port was being connected
      return;
    }
    let relayed = false;
    socket.once("close", () => {
      if (!relayed) upstream.terminate(); // the upgrade never completed: nothing else releases the guest connection
    });
    const log = this.#deps.logger.child({
      kind: "VirtualMachineInstance",
      namespace: r.namespace,
      name: tunnel.vmi.metadata?.name ?? r.name,
      port: tunnel.port,
      protocol: tunnel.protocol,
      user: user?.username,
    });
    this.#wss.handleUpgrade(req, socket, head, (client) => {
      relayed = true;
      this.#deps.portForwardTunnels?.opened(r.namespace, r.name);
      log.info("port-forward tunnel opened");
      relayWebSockets(client, upstream, () => {
        this.#deps.portForwardTunnels?.closed(r.namespace, r.name);
        log.info("port-forward tunnel closed");
      });
    });
  }

  #healthz(res: ServerResponse): void {
    // Draining (SIGTERM, server.ts): not ready, so the pod leaves its Service while it still answers.
    res.writeHead(this.#draining ? 503 : 200, { "Content-Type": "text/plain" });
    res.end(this.#draining ? "shutting down" : "ok");
  }

  /** From now on /healthz answers 503: the readiness probe takes this replica out of its Service. */
  drain(): void {
    this.#draining = true;
  }

  /** Closes open console sessions. */
  close(): void {
    for (const client of this.#wss.clients) client.terminate();
    this.#wss.close();
  }
}
