import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { registerTestGuest } from "@kvt/images";
import { LauncherClient, launcherSocketPath } from "@kvt/launcher-rpc";
import { hasKvm, testGuestPath } from "@kvt/vmm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildLauncherImage, builtinShim, bundleEntry, bundleLazyRequires } from "./launcher-image.ts";

const projectRoot = new URL("../../../../", import.meta.url).pathname;
let dir: string;
let entry: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-limg-"));
  entry = await buildLauncherImage(projectRoot, join(dir, "image"));
}, 120_000);
afterAll(() => {
  child?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

function writeProbe(source: string): string {
  const path = join(dir, "probe.cjs");
  writeFileSync(path, source);
  return path;
}

describe("builtinShim", () => {
  it("re-exports a built-in's values through require, leaving its lazy getters to the default export", () => {
    const shim = builtinShim("node:http");
    expect(shim).toContain('createRequire(import.meta.url)("node:http")');
    expect(shim).toContain("export const createServer = m.createServer;");
    expect(shim).toContain("export default m;");
    expect(shim).not.toMatch(/export const WebSocket\b/);
    expect(builtinShim("fs")).not.toMatch(/export const promises\b/);
  });
});

describe("bundleLazyRequires", () => {
  it("turns a createRequire'd call of a package into require, leaving built-ins, relative and computed names", () => {
    const code = [
      "const requireHere = createRequire(import.meta.url);",
      "requireHere(\"reflect-metadata\"); requireHere('@peculiar/x509');",
      'requireHere("node:crypto"); requireHere("fs"); requireHere("./x.cjs"); requireHere(name); other.requireHere("a");',
    ].join("\n");
    expect(bundleLazyRequires(code).split("\n").slice(1)).toEqual([
      "require(\"reflect-metadata\"); require('@peculiar/x509');",
      'requireHere("node:crypto"); requireHere("fs"); requireHere("./x.cjs"); requireHere(name); other.requireHere("a");',
    ]);
    expect(bundleLazyRequires('x("a")')).toBe('x("a")');
  });

  it("a bundle of @kvt/certs makes a certificate where no node_modules is (the release images)", async () => {
    const src = join(dir, "certs-entry.ts");
    writeFileSync(
      src,
      [
        `import { generateCa, issueCertificate } from ${JSON.stringify(join(projectRoot, "libs/certs/src/index.ts"))};`,
        'const ca = await generateCa("bundle-test-ca");',
        'const leaf = await issueCertificate(ca, { commonName: "bundle-test", usage: "client" });',
        'console.log(leaf.certPem.split("\\n")[0]);',
      ].join("\n"),
    );
    const out = mkdtempSync(join(tmpdir(), "kvt-certs-bundle-")); // under /tmp: no node_modules above it
    try {
      const bundled = await bundleEntry(src, out, "certs.mjs");
      // Move the modules' URLs off this checkout, as the images do: nothing may resolve from its node_modules.
      const checkoutUrl = pathToFileURL(projectRoot).href;
      writeFileSync(bundled, readFileSync(bundled, "utf8").replaceAll(checkoutUrl, "file:///opt/kvt-nowhere/"));
      const run = spawnSync(process.execPath, [bundled], { cwd: out, encoding: "utf8" });
      expect(run.stderr).toBe("");
      expect(run.stdout.trim()).toBe("-----BEGIN CERTIFICATE-----");
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("the launcher image", () => {
  it("is virt-launcher: the bundle answers --help like the sources", () => {
    const run = spawnSync(process.execPath, [entry, "--help"], { encoding: "utf8" });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^Usage: virt-launcher /m);
    // Module-relative paths point at the sources, not at the bundle's directory.
    const bundled = readdirSync(dirname(entry))
      .filter((f) => /\.m?js$/.test(f))
      .map((f) => readFileSync(join(dirname(entry), f), "utf8"))
      .join("\n");
    expect(bundled).toContain(`${new URL("native/index.ts", `file://${projectRoot}`).href}`);
  });

  it("loads only what a native launcher needs: no undici, HTTP/2, TLS, crypto, prom-client or YAML", () => {
    // The module graph is evaluated before --help is parsed, so this is every launcher's start-up set.
    const probe = [
      "process.on('exit', () => {",
      "  const builtins = process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13));",
      "  process.stderr.write('PROBE ' + JSON.stringify({ builtins }) + '\\n');",
      "});",
    ].join("\n");
    const run = spawnSync(process.execPath, ["--require", writeProbe(probe), entry, "--help"], { encoding: "utf8" });
    expect(run.status).toBe(0);
    const line = run.stderr.split("\n").find((l) => l.startsWith("PROBE "));
    const { builtins } = JSON.parse(line?.slice(6) ?? "{}") as { builtins: string[] };
    expect(builtins).toContain("http");
    for (const heavy of ["internal/deps/undici/undici", "http2", "tls", "crypto", "zlib"]) {
      expect(builtins, heavy).not.toContain(heavy);
    }
    // The chunks a launcher evaluates at start: the entry and its static imports, transitively (not `import()`).
    const loaded = new Map<string, string>();
    const visit = (file: string): void => {
      if (loaded.has(file)) return;
      const source = readFileSync(join(dir, "image", file), "utf8");
      loaded.set(file, source);
      for (const m of source.matchAll(/^import [^;]*?from "\.\/([^"]+)";$/gm)) visit(m[1] ?? "");
    };
    visit("virt-launcher.mjs");
    expect(loaded.size).toBeGreaterThan(1);
    const loadedSource = [...loaded.values()].join("\n");
    expect(loadedSource).not.toContain("node_modules/prom-client/");
    expect(loadedSource).not.toContain("node_modules/yaml/");
  });

  it.skipIf(!hasKvm())(
    "boots the test guest through the native addon found beside the sources",
    async () => {
      const store = join(dir, "images");
      registerTestGuest(testGuestPath(), store);
      const uid = "5eed0000aaaa1111bbbb";
      child = spawn(process.execPath, [entry, "--namespace", "default", "--name", "g", "--uid", uid], {
        env: { PATH: process.env.PATH, KUBEVIRT_POD_DIR: dir, KVT_IMAGE_STORE: store, LOG_LEVEL: "silent" },
        stdio: "ignore",
      });
      const client = new LauncherClient(launcherSocketPath(dir, uid.slice(0, 16)), { timeoutMs: 2000 });
      await expect
        .poll(async () => (await client.info().catch(() => undefined))?.state, { timeout: 30_000, interval: 20 })
        .toBe("NoDomain");
      const vmi = {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstance",
        metadata: { name: "g", namespace: "default", uid },
        spec: {
          domain: {
            devices: {},
            resources: { requests: { memory: "64Mi" } },
            firmware: { kernelBoot: { kernelArgs: "pattern=idle tick=20" } },
          },
          volumes: [{ name: "disk", containerDisk: { image: "local/test-guest:latest" } }],
        },
      };
      expect((await client.sync({ vmi }, { timeoutMs: 30_000 })).state).toBe("Running");
      await expect
        .poll(() => readFileSync(join(dir, "virt-serial0-log"), "utf8"), { timeout: 10_000 })
        .toContain("kvt-guest progress n=2 ");
    },
    60_000,
  );
});
