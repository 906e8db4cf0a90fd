import { join } from "node:path";
import { Linter } from "eslint";
import tseslint from "typescript-eslint";
import { describe, expect, it } from "vitest";
import { plugin } from "./module-boundaries-rule.ts";

const workspaceRoot = new URL("../../../", import.meta.url).pathname;

function lint(fileInWorkspace: string, code: string): string[] {
  const linter = new Linter({ configType: "flat", cwd: workspaceRoot });
  const messages = linter.verify(
    code,
    [
      {
        files: ["**/*.ts"],
        languageOptions: { parser: tseslint.parser, sourceType: "module" },
        plugins: { kvt: plugin },
        rules: { "kvt/module-boundaries": ["error", { workspaceRoot }] },
      },
    ],
    join(workspaceRoot, fileInWorkspace),
  );
  return messages.map((m) => m.message);
}

describe("kvt/module-boundaries", () => {
  it.each([
    [
      "a lib importing an app",
      "libs/observability/src/x.ts",
      'import "@kvt/virt-api";',
      /can only depend on projects tagged type:api, type:core/,
    ],
    [
      "a control-plane app importing the native addon",
      "apps/virt-controller/src/x.ts",
      'import { loadAddon } from "@kvt/native";',
      /can only depend on|must not depend/,
    ],
    [
      "a control-plane app requiring the native addon",
      "apps/virt-api/src/x.ts",
      'const a = require("@kvt/native");',
      /can only depend on|must not depend/,
    ],
    [
      "a control-plane app loading the native addon through a createRequire result",
      "apps/virt-api/src/x.ts",
      'import { createRequire } from "node:module";\nconst requireHere = createRequire(import.meta.url);\nrequireHere("@kvt/native");',
      /can only depend on|must not depend/,
    ],
    [
      "a control-plane app calling createRequire(...) directly",
      "apps/virt-api/src/x.ts",
      'import { createRequire } from "node:module";\ncreateRequire(import.meta.url)("@kvt/native");',
      /can only depend on|must not depend/,
    ],
    [
      "a relative import into another project",
      "apps/virt-handler/src/x.ts",
      'import "../../../libs/runtime/src/index.ts";',
      /import "@kvt\/runtime" instead/,
    ],
    [
      "a non-test file importing a tool",
      "apps/virt-controller/src/x.ts",
      'import "@kvt/local-cluster";',
      /can only depend on/,
    ],
    [
      "a non-test file importing the testing lib",
      "libs/kube/src/x.ts",
      'import "@kvt/testing";',
      /only be imported from \*\.test\.ts/,
    ],
    [
      "a deep import",
      "apps/virt-handler/src/x.ts",
      'import "@kvt/runtime/src/main-command.ts";',
      /exports only from its barrel/,
    ],
    [
      "a core lib importing another app dynamically",
      "libs/runtime/src/x.ts",
      'await import("@kvt/virt-handler");',
      /can only depend on/,
    ],
  ])("reports %s", (_name, file, code, expected) => {
    const messages = lint(file, code);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(expected);
  });

  it.each([
    ["an app importing a core lib", "apps/virt-handler/src/x.ts", 'import { main } from "@kvt/runtime";'],
    ["a core lib importing a core lib", "libs/observability/src/x.ts", 'import "@kvt/runtime";'],
    ["a relative import within the project", "apps/virt-api/src/x.ts", 'import "./y.ts";'],
    ["a third-party package", "libs/runtime/src/x.ts", 'import { pino } from "pino";'],
    ["a tool importing an app", "tools/scripts/src/x.ts", 'import "@kvt/virt-api";'],
    ["a subpath the package exports", "tools/scripts/src/x.ts", 'import "@kvt/virt-api/lib";'],
    ["a test importing the local cluster tool", "apps/virt-controller/src/x.test.ts", 'import "@kvt/local-cluster";'],
    ["a bench importing the test support lib", "apps/virt-controller/bench/x.bench.ts", 'import "@kvt/testing";'],
  ])("allows %s", (_name, file, code) => {
    expect(lint(file, code)).toEqual([]);
  });
});
