import { defineConfig } from "vitest/config";

const report = `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}.json`;
export default defineConfig({
  test: {
    passWithNoTests: true,
    // The image build (cold: a Debian download) and the registry round trip run in beforeAll with their own timeouts.
    testTimeout: 120_000,
    include: ["src/**/*.test.ts"],
    reporters: ["default", ["json", { outputFile: report }]],
  },
});
