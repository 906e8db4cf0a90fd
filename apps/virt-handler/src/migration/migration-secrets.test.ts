/**
 * The migration secret and the launchers' certificates go handler to handler over mutual TLS (no Secret in the API
 * server): the target handler's endpoint answers only virt-handler's certificate, only for the open migration it
 * prepared, only to its source node, and only once the source launcher's certificate is pinned in the target
 * launcher; the source checks the target's certificate and never waits unbounded. Real TLS on 127.0.0.1.
 */
import { request as httpsRequest } from "node:https";
import { createServer, type Server, type Socket } from "node:net";
import type { VirtualMachineInstance } from "@kvt/api";
import { type CertificateAndKey, generateCa, issueCertificate, mintMigrationCertificate } from "@kvt/certs";
import { createLogger } from "@kvt/observability";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HandlerServer, VIRT_API_CLIENT_NAME } from "../http/handler-server.ts";
import {
  HandlerMigrationSecrets,
  type MigrationHandoff,
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
/** The launchers' per-migration certificates (as the handlers mint them). */
let sourceCert: string;
let targetCert: string;
/** What the target's launchers were asked to pin: "vmiUid/migrationUid certificate". */
const pinned: string[] = [];
let pinFails: Error | undefined;

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
    migrationSecret: (ns, name, uid, caller, certificate) =>
      target.answer(vmis.get(`${ns}/${name}`), uid, caller, certificate, async (vmiUid, migrationUid, pem) => {
        if (pinFails) throw pinFails;
        pinned.push(`${vmiUid}/${migrationUid} ${pem}`);
      }),
  });
  address = `127.0.0.1:${await server.listen(0, "127.0.0.1")}`;
  sourceCert = (await mintMigrationCertificate("kubevirt-migration-m1-source")).certPem;
  targetCert = (await mintMigrationCertificate("kubevirt-migration-m1-target")).certPem;
  const vm1 = migrating("vm1", "u1", "m1");
  vmis.set("default/vm1", vm1);
  target.publish(vm1, "m1", { secret: "s3cret", certificate: targetCert });
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

/** What `exchange` rejects with. */
async function refusal(p: Promise<MigrationHandoff>): Promise<MigrationSecretError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MigrationSecretError);
  return error as MigrationSecretError;
}

/** A raw request (POST unless said) of `path` with `pair` as client certificate (none: no certificate); the status
 *  or the socket error. */
function rawGet(path: string, pair?: CertificateAndKey, method = "POST", body = "{}"): Promise<number | string> {
  return new Promise((resolve) => {
    const req = httpsRequest(`https://${address}${path}`, {
      method,
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
    req.end(method === "POST" ? body : undefined);
  });
}

describe("the target's endpoint: who gets a migration secret", () => {
  it("the source node's handler sends its launcher's certificate and gets the secret and the target's", async () => {
    pinned.length = 0;
    const handoff = await source().exchange(migrating("vm1", "u1", "m1"), "m1", sourceCert);
    expect(handoff).toEqual({ secret: "s3cret", certificate: targetCert });
    // Pinned in the target launcher before the answer left: the source launcher may connect at once.
    expect(pinned).toEqual([`u1/m1 ${sourceCert}`]);
  });

  it("refuses a TLS exchange without the source's certificate, or with a bad one, without pinning (400)", async () => {
    pinned.length = 0;
    const vm1 = migrating("vm1", "u1", "m1");
    const none = await refusal(source().exchange(vm1, "m1"));
    expect(none.permanent).toBe(true);
    expect(none.message).toContain("400: migration m1 runs over TLS: the source launcher's certificate is required");
    expect(none.message).toContain("migrations.disableTLS must be the same at both ends");
    const garbage = await refusal(source().exchange(vm1, "m1", "-----BEGIN CERTIFICATE-----\nAAAA\n"));
    expect(garbage.message).toContain("400: the source launcher's certificate is not an X.509 PEM certificate");
    const old = await mintMigrationCertificate(
      "kubevirt-migration-m1-source",
      60_000,
      new Date(Date.now() - 3_600_000),
    );
    const expired = await refusal(source().exchange(vm1, "m1", old.certPem));
    expect(expired.message).toMatch(/400: the source launcher's certificate is valid from .* to .*, not now/);
    expect(pinned).toEqual([]);
  });

  it("a target launcher that cannot pin the certificate yet fails the exchange, and the source may ask again", async () => {
    pinFails = new Error("no target launcher of migration m1 on this node yet");
    try {
      const e = await refusal(source().exchange(migrating("vm1", "u1", "m1"), "m1", sourceCert));
      expect(e.permanent).toBe(false);
      expect(e.message).toContain("answered 500");
    } finally {
      pinFails = undefined;
    }
  });

  it("under migrations.disableTLS the answer is the secret alone, and no certificate is pinned", async () => {
    pinned.length = 0;
    const vm4 = migrating("vm4", "u4", "m4");
    vmis.set("default/vm4", vm4);
    target.publish(vm4, "m4", { secret: "plain" });
    expect(await source().exchange(vm4, "m4")).toEqual({ secret: "plain" });
    expect(pinned).toEqual([]);
    // A source that still sent a certificate learns the target expects a plain stream.
    const e = await refusal(source().exchange(vm4, "m4", sourceCert));
    expect(e.message).toContain("sent no certificate: its launcher expects an unencrypted stream");
  });

  it("refuses virt-api's client certificate on that path (403), as the handlers' on virt-api's endpoints", async () => {
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), virtApi)).toBe(403);
    expect(await rawGet("/v1/namespaces/default/virtualmachineinstances/vm1/guestosinfo", handler, "GET")).toBe(403);
    const withCertificate = JSON.stringify({ certificate: sourceCert });
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), handler, "POST", withCertificate)).toBe(200);
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), handler, "GET")).toBe(405);
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), handler, "POST", "[1]")).toBe(400);
    const huge = JSON.stringify({ certificate: "x".repeat(20_000) });
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), handler, "POST", huge)).toBe(413);
  });

  it("refuses a peer without a certificate, or with one from another CA, before any request", async () => {
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"))).toEqual(expect.any(String));
    expect(await rawGet(migrationSecretPath("default", "vm1", "m1"), foreignHandler)).toEqual(expect.any(String));
  });

  it("refuses another migration of the VMI for good (403)", async () => {
    const e = await refusal(source().exchange(migrating("vm1", "u1", "m-old"), "m-old", sourceCert));
    expect(e.permanent).toBe(true);
    expect(e.message).toContain("403: migration m-old is not the open migration of VMI default/vm1");
  });

  it("refuses a handler of a node that is not the migration's source (403)", async () => {
    const e = await refusal(source("node03").exchange(migrating("vm1", "u1", "m1"), "m1", sourceCert));
    expect(e.permanent).toBe(true);
    expect(e.message).toContain('comes from node node01, not "node03"');
  });

  it("a VMI unknown here (404) or a target not prepared yet (409) may pass: the source asks again", async () => {
    const unknown = await refusal(source().exchange(migrating("vm9", "u9", "m9"), "m9", sourceCert));
    expect(unknown.permanent).toBe(false);
    expect(unknown.message).toContain("answered 404");
    const notYet = await refusal(source().exchange(migrating("vm2", "u2", "m2"), "m2", sourceCert));
    expect(notYet.permanent).toBe(false);
    expect(notYet.message).toContain("409: the target of migration m2 is not prepared on this node yet");
  });

  it("forgets a migration it released", async () => {
    const vm3 = migrating("vm3", "u3", "m3");
    vmis.set("default/vm3", vm3);
    target.publish(vm3, "m3", { secret: "three", certificate: targetCert });
    expect((await source().exchange(vm3, "m3", sourceCert)).secret).toBe("three");
    target.release("m3");
    expect((await refusal(source().exchange(vm3, "m3", sourceCert))).message).toContain("409");
  });
});

describe("the source's side: whom it asks, and for how long", () => {
  it("refuses a target whose certificate is not virt-handler's", async () => {
    const impostor = new HandlerServer({
      findVmi: () => undefined,
      launcherFor: () => undefined,
      logger,
      tls: tlsOf(await issueCertificate(ca, { commonName: "virt-api.kubevirt.pod.cluster.local" })),
      migrationSecret: async () => ({ secret: "stolen" }),
    });
    const at = `127.0.0.1:${await impostor.listen(0, "127.0.0.1")}`;
    try {
      const e = await refusal(source().exchange(migrating("vm1", "u1", "m1", at), "m1", sourceCert));
      expect(e.message).toContain('its certificate is for "virt-api.kubevirt.pod.cluster.local"');
    } finally {
      await impostor.close();
    }
  });

  it("says so when the target has published no address", async () => {
    const e = await refusal(source().exchange(migrating("vm1", "u1", "m1", ""), "m1", sourceCert));
    expect(e.permanent).toBe(false);
    expect(e.message).toContain("has not published its address");
  });

  it("a closed port fails at once, and a target that never answers within the timeout", async () => {
    const closed = await refusal(source().exchange(migrating("vm1", "u1", "m1", "127.0.0.1:1"), "m1", sourceCert));
    expect(closed.message).toContain("cannot reach the target's virt-handler at 127.0.0.1:1");
    const sockets: Socket[] = [];
    const silent: Server = createServer((s) => void sockets.push(s)); // accepts, never speaks TLS
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as { port: number }).port;
    try {
      const started = Date.now();
      const e = await refusal(
        source("node01", handler, 300).exchange(migrating("vm1", "u1", "m1", `127.0.0.1:${port}`), "m1", sourceCert),
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
