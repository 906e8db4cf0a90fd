import { existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CORE_V1, type KubeObject, kubeConfigFor, RestClient, resourceClient } from "@kvt/kube";
import { eventually } from "@kvt/testing";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { ComponentVolumes, componentTlsFiles, componentVolumeDir } from "./component-volumes.ts";

type Obj = KubeObject & { data?: Record<string, string>; type?: string };
const b64 = (s: string): string => Buffer.from(s).toString("base64");

describe("ComponentVolumes: the components' Secret and ConfigMap volumes, as a kubelet writes them", () => {
  let server: ApiServerHandle;
  let transport: RestClient;
  let dataDir: string;
  let volumes: ComponentVolumes;
  const secrets = () => resourceClient<Obj>(transport, CORE_V1.secrets);
  const secret = (name: string, crt: string): Obj => ({
    metadata: { name, namespace: "kubevirt" },
    type: "kubernetes.io/tls",
    data: { "tls.crt": b64(crt), "tls.key": b64(`key of ${crt}`) },
  });

  beforeAll(async () => {
    server = await startApiServer({ inMemory: true, port: 0, logger: pino({ level: "silent" }) });
    transport = new RestClient(kubeConfigFor(server.url, server.token));
    await resourceClient(transport, CORE_V1.namespaces).create({ metadata: { name: "kubevirt" } });
    dataDir = mkdtempSync(join(tmpdir(), "kvt-volumes-"));
    volumes = new ComponentVolumes({ transport, namespace: "kubevirt", dataDir, logger: pino({ level: "silent" }) });
    volumes.start();
  }, 60_000);

  afterAll(async () => {
    volumes?.stop();
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("writes each Secret's keys (0600) once they exist, and is ready when all three are", async () => {
    await secrets().create(secret("kubevirt-virt-api-certs", "cert of kubevirt-virt-api-certs"));
    await secrets().create(secret("kubevirt-virt-handler-certs", "cert of kubevirt-virt-handler-certs"));
    await secrets().create(secret("kubevirt-ca", "the CA's own Secret: not a volume"));
    // Written as they come; not ready while one is missing.
    await eventually(() => existsSync(componentTlsFiles(dataDir).handlerClient.cert) || undefined);
    expect(volumes.isReady()).toBe(false);
    await secrets().create(secret("kubevirt-virt-handler-server-certs", "cert of kubevirt-virt-handler-server-certs"));
    await eventually(() => volumes.isReady() || undefined);
    const files = componentTlsFiles(dataDir);
    expect(readFileSync(files.virtApi.cert, "utf8")).toBe("cert of kubevirt-virt-api-certs");
    expect(readFileSync(files.handlerClient.key, "utf8")).toBe("key of cert of kubevirt-virt-handler-certs");
    expect(readFileSync(files.handlerServer.cert, "utf8")).toBe("cert of kubevirt-virt-handler-server-certs");
    expect(statSync(files.virtApi.key).mode & 0o777).toBe(0o600);
    // The kubelet's layout: the key is a symlink through ..data.
    expect(lstatSync(files.virtApi.cert).isSymbolicLink()).toBe(true);
    expect(readlinkSync(files.virtApi.cert)).toBe(join("..data", "tls.crt"));
    expect(existsSync(componentVolumeDir(dataDir, "kubevirt-ca"))).toBe(false);
  });

  it("replaces the files when the object changes (a renewal)", async () => {
    const current = await secrets().get("kubevirt", "kubevirt-virt-api-certs");
    await secrets().update({ ...current, data: { "tls.crt": b64("renewed"), "tls.key": b64("new key") } });
    const files = componentTlsFiles(dataDir);
    await eventually(() => (readFileSync(files.virtApi.cert, "utf8") === "renewed" ? true : undefined));
    expect(readFileSync(files.virtApi.key, "utf8")).toBe("new key");
  });
});
