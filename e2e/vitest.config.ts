import { defineConfig } from "vitest/config";

const report = `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}.json`;
export default defineConfig({
  test: {
    passWithNoTests: true,
    include: ["**/*.e2e.test.ts"],
    exclude: ["node_modules/**"],
    globalSetup: ["lib/global-setup.ts"],
    // One cluster serves every file; files run one after the other so they never fight over it.
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 300_000,
    reporters: ["default", ["json", { outputFile: report }]],
  },
});
