import { defineConfig } from "vitest/config";

const report = `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}.json`;
export default defineConfig({
  test: {
    passWithNoTests: true,
    include: ["src/**/*.test.ts"],
    reporters: ["default", ["json", { outputFile: report }]],
  },
});
