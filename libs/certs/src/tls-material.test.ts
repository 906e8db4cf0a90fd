import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type CertificateAndKey, generateCa, issueCertificate } from "./certs.ts";
import { type CaBundleSource, fileCaBundle, type TlsMaterial, watchTlsMaterial } from "./tls-material.ts";

/** A CA bundle source the test feeds by hand (a ConfigMap watch in the components). */
function manualCa(): CaBundleSource & { set(bundle: string): void } {
  let first: ((b: string) => void) | undefined;
  const firstValue = new Promise<string>((resolve) => {
    first = resolve;
  });
  const listeners: ((b: string) => void)[] = [];
  return {
    firstValue: () => firstValue,
    subscribe: (l) => {
      listeners.push(l);
    },
    stop: () => undefined,
    set: (bundle) => {
      first?.(bundle);
      for (const l of listeners) l(bundle);
    },
  };
}

async function until(check: () => boolean, timeoutMs = 8000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("watchTlsMaterial()", () => {
  let dir: string;
  let pair: CertificateAndKey;
  let certFile: string;
  let keyFile: string;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-tls-material-"));
    [certFile, keyFile] = [join(dir, "tls.crt"), join(dir, "tls.key")];
    pair = await issueCertificate(await generateCa("kubevirt.io@1"), { commonName: "c" });
    writeFileSync(certFile, pair.certPem);
    writeFileSync(keyFile, pair.keyPem);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("waits for the first CA bundle, then hands on each new bundle and each complete renewed pair", async () => {
    const ca = manualCa();
    let started = false;
    const starting = watchTlsMaterial({ certFile, keyFile, ca }).then((w) => {
      started = true;
      return w;
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(started).toBe(false); // no server may start without the CA it trusts
    ca.set("CA1");
    const watch = await starting;
    try {
      expect(watch.initial).toEqual({ cert: pair.certPem, key: pair.keyPem, ca: "CA1" });
      const applied: TlsMaterial[] = [];
      watch.follow((m) => applied.push(m));
      ca.set("CA2\nCA1");
      expect(applied.at(-1)).toEqual({ cert: pair.certPem, key: pair.keyPem, ca: "CA2\nCA1" });
      // The certificate swapped before its key: nothing is handed on until both belong together.
      const renewed = await issueCertificate(await generateCa("kubevirt.io@2"), { commonName: "c" });
      writeFileSync(certFile, renewed.certPem);
      await new Promise((r) => setTimeout(r, 2500));
      expect(applied).toHaveLength(1);
      // A new bundle meanwhile still goes through, with the pair in use.
      ca.set("CA3");
      expect(applied.at(-1)).toEqual({ cert: pair.certPem, key: pair.keyPem, ca: "CA3" });
      writeFileSync(keyFile, renewed.keyPem);
      await until(() => applied.at(-1)?.key === renewed.keyPem);
      expect(applied.at(-1)).toEqual({ cert: renewed.certPem, key: renewed.keyPem, ca: "CA3" });
    } finally {
      watch.stop();
    }
  });

  it("reports what the consumer refuses and offers it again with the next change", async () => {
    const ca = manualCa();
    ca.set("CA1");
    const refused: unknown[] = [];
    const watch = await watchTlsMaterial({ certFile, keyFile, ca, onRefused: (e) => refused.push(e) });
    try {
      const applied: string[] = [];
      let accept = false;
      watch.follow((m) => {
        if (!accept) throw new Error("not now");
        applied.push(m.ca);
      });
      ca.set("CA2");
      expect(refused).toHaveLength(1);
      accept = true;
      ca.set("CA3");
      expect(applied).toEqual(["CA3"]);
    } finally {
      watch.stop();
    }
  });

  it("reads the bundle from a file with fileCaBundle, and stops waiting when the process stops", async () => {
    const caFile = join(dir, "ca.crt");
    writeFileSync(caFile, "FILE-CA");
    const watch = await watchTlsMaterial({ certFile, keyFile, ca: fileCaBundle(caFile) });
    const applied: string[] = [];
    watch.follow((m) => applied.push(m.ca));
    writeFileSync(caFile, "FILE-CA2");
    await until(() => applied.at(-1) === "FILE-CA2");
    watch.stop();
    expect(watch.initial.ca).toBe("FILE-CA");
    const controller = new AbortController();
    const waiting = watchTlsMaterial({ certFile, keyFile, ca: manualCa(), signal: controller.signal });
    controller.abort();
    await expect(waiting).rejects.toThrow("stopped while waiting for the CA bundle");
  });
});
