import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { APP_ROOT, bundleApp } from "./app-bundle.ts";

const root = new URL("../../../", import.meta.url).pathname.replace(/\/$/, "");
const tmp = mkdtempSync(join(tmpdir(), "kvt-app-bundle-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("bundleApp", () => {
  it("carries the files its modules read beside themselves: virt-handler's device plugin .proto", async () => {
    const bundle = await bundleApp(root, "virt-handler", join(tmp, "virt-handler"));
    expect(bundle.entry).toBe(`${APP_ROOT}/bundle/virt-handler/virt-handler.mjs`);
    expect(bundle.assets).toEqual([
      {
        from: join(root, "libs/device-plugin/proto/api.proto"),
        to: `${APP_ROOT}/libs/device-plugin/proto/api.proto`,
      },
    ]);
    for (const a of bundle.assets) expect(existsSync(a.from)).toBe(true);
    const api = await bundleApp(root, "virt-api", join(tmp, "virt-api"));
    expect(api.assets).toEqual([]);
  }, 120_000);
});
