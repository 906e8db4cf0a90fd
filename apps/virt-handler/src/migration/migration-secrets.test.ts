/**
 * The migration secret goes handler to handler over mutual TLS (no Secret in the API server): the target handler's
 * endpoint answers only virt-handler's certificate, only for the open migration it prepared, only to its source
 * node; the source checks the target's certificate and never waits unbounded. Real TLS on 127.0.0.1.
 */
import { request as httpsRequest } from "node:https";
import { createServer, type Server, type Socket } from "node:net";
import type { VirtualMachineInstance } from "@kvt/api";
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/certs";
import { createLogger } from "@kvt/observability";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HandlerServer, VIRT_API_CLIENT_NAME } from "../http/handler-server.ts";
import {
  HandlerMigrationSecrets,
  MigrationSecretError,
  migrationSecretPath,
  SOURCE_NODE_HEADER,
  VIRT_HANDLER_NAME,
} from "./migration-secrets.ts";

const logger = createLogger({ component: "test", level: "silent" });
let ca: CertificateAndKey;
let handler: CertificateAndKey;
let virtApi: CertificateAndKey;
let foreignHandler: CertificateAndKey;
let target: HandlerMigrationSecrets;
let server: HandlerServer;
let address: string;
const vmis = new Map<string, VirtualMachineInstance>();

/** A VMI migrating node01 -> node02 whose target handler listens at `syncAddress`. */
function migrating(name: string, uid: string, migrationUid: string, syncAddress = address): VirtualMachineInstance {
  return {
    metadata: { namespace: "default", name, uid },
    spec: { domain: { devices: {} } },
    status: {
      nodeName: "node01",
      migrationState: { migrationUid, sourceNode: "node01", targetNode: "node02", targetState: { syncAddress } },
    },
  };
}

beforeAll(async () => {
  ca = await generateCa("kubevirt-ca");
  handler = await issueCertificate(ca, { commonName: VIRT_HANDLER_NAME, ipAddresses: ["127.0.0.1"], usage: "both" });
  virtApi = await issueCertificate(ca, { commonName: VIRT_API_CLIENT_NAME, usage: "client" });
  foreignHandler = await issueCertificate(await generateCa("kubevirt-ca"), {
    commonName: VIRT_HANDLER_NAME,
    usage: "both",
  });
  target = new HandlerMigrationSecrets({ nodeName: "node02", tls: () => tlsOf(handler) });
  server = new HandlerServer({
    findVmi: () => undefined,
    launcherFor: () => undefined,
    logger,
    tls: tlsOf(handler),
    migrationSecret: (ns, name, uid, caller) => target.answer(vmis.get(`${ns}/${name}`), uid, caller),
  });
  address = `127.0.0.1:${await server.listen(0, "127.0.0.1")}`;
  const vm1 = migrating("vm1", "u1", "m1");
  vmis.set("default/vm1", vm1);
  target.publish(vm1, "m1", "s3cret");
  vmis.set("default/vm2", migrating("vm2", "u2", "m2")); // migrating here, but not prepared yet
});

afterAll(async () => {
  await server.close();
});

function tlsOf(pair: CertificateAndKey): { cert: string; key: string; ca: string } {
  return { cert: pair.certPem, key: pair.keyPem, ca: ca.certPem };
}

/** The source handler of `nodeName`. */
function source(nodeName = "node01", pair = handler, timeoutMs?: number): HandlerMigrationSecrets {
  return new HandlerMigrationSecrets({ nodeName, tls: () => tlsOf(pair), ...(timeoutMs ? { timeoutMs } : {}) });
}

/** What `read` rejects with. */
async function refusal(p: Promise<string>): Promise<MigrationSecretError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MigrationSecretError);
  return error as MigrationSecretError;
}

/** A raw GET of `path` with `pair` as client certificate (none: no certificate); the status or the socket error. */
function rawGet(path: string, pair?: CertificateAndKey): Promise<number | string> {
  return new Promise((resolve) => {
    const req = httpsRequest(`https://${address}${path}`, {
      ca: ca.certPem,
      ...(pair ? { cert: pair.certPem, key: pair.keyPem } : {}),
      headers: { [SOURCE_NODE_HEADER]: "node01" },
      checkServerIdentity: () => undefined,
    });
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", (e) => resolve(e.message));
    req.end();
  });
}

describe("the target's endpoint: who gets a migration secret", () => {
  it("the source node's handler gets the secret of the migration this node prepared", async () => {
    expect(await source().read(migrating("vm1", "u1", "m1"), "m1")).toBe("s3cret");
  });

  it("refuses virt-api's client certificate on that path (403), as the handlers' on virt-api's endpoints", async () => {
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), virtApi)).toBe(403);
    expect(await rawGet("/v1/namespaces/default/virtualmachineinstances/vm1/guestosinfo", handler)).toBe(403);
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), handler)).toBe(200);
  });

  it("refuses a peer without a certificate, or with one from another CA, before any request", async () => {
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"))).toEqual(expect.any(String));
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), foreignHandler)).toEqual(expect.any(String));
  });

  it("refuses another migration of the VMI for good (403)", async () => {
    const e = await refusal(source().read(migrating("vm1", "u1", "m-old"), "m-old"));
    expect(e.permanent).toBe(true);
    expect(e.message).toContain("403: migration m-old is not the open migration of VMI default/vm1");
  });

  it("refuses a handler of a node that is not the migration's source (403)", async () => {
    const e = await refusal(source("node03").read(migrating("vm1", "u1", "m1"), "m1"));
    expect(e.permanent).toBe(true);
    expect(e.message).toContain('comes from node node01, not "node03"');
  });

  it("a VMI unknown here (404) or a target not prepared yet (409) may pass: the source asks again", async () => {
    const unknown = await refusal(source().read(migrating("vm9", "u9", "m9"), "m9"));
    expect(unknown.permanent).toBe(false);
    expect(unknown.message).toContain("answered 404");
    const notYet = await refusal(source().read(migrating("vm2", "u2", "m2"), "m2"));
    expect(notYet.permanent).toBe(false);
    expect(notYet.message).toContain("409: the target of migration m2 is not prepared on this node yet");
  });

  it("forgets a migration it released", async () => {
    const vm3 = migrating("vm3", "u3", "m3");
    vmis.set("default/vm3", vm3);
    target.publish(vm3, "m3", "three");
    expect(await source().read(vm3, "m3")).toBe("three");
    target.release("m3");
    expect((await refusal(source().read(vm3, "m3"))).message).toContain("409");
  });
});

describe("the source's side: whom it asks, and for how long", () => {
  it("refuses a target whose certificate is not virt-handler's", async () => {
    const impostor = new HandlerServer({
      findVmi: () => undefined,
      launcherFor: () => undefined,
      logger,
      tls: tlsOf(await issueCertificate(ca, { commonName: "virt-api.kubevirt.pod.cluster.local" })),
      migrationSecret: () => "stolen",
    });
    const at = `127.0.0.1:${await impostor.listen(0, "127.0.0.1")}`;
    try {
      const e = await refusal(source().read(migrating("vm1", "u1", "m1", at), "m1"));
      expect(e.message).toContain('its certificate is for "virt-api.kubevirt.pod.cluster.local"');
    } finally {
      await impostor.close();
    }
  });

  it("says so when the target has published no address", async () => {
    const e = await refusal(source().read(migrating("vm1", "u1", "m1", ""), "m1"));
    expect(e.permanent).toBe(false);
    expect(e.message).toContain("has not published its address");
  });

  it("a closed port fails at once, and a target that never answers within the timeout", async () => {
    const closed = await refusal(source().read(migrating("vm1", "u1", "m1", "127.0.0.1:1"), "m1"));
    expect(closed.message).toContain("cannot reach the target's virt-handler at 127.0.0.1:1");
    const sockets: Socket[] = [];
    const silent: Server = createServer((s) => void sockets.push(s)); // accepts, never speaks TLS
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as { port: number }).port;
    try {
      const started = Date.now();
      const e = await refusal(
        source("node01", handler, 300).read(migrating("vm1", "u1", "m1", `127.0.0.1:${port}`), "m1"),
      );
      expect(e.message).toContain("no answer in 300 ms");
      expect(e.permanent).toBe(false);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });
});
