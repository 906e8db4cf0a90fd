// Type-aware ESLint for the promise and `any` rules, plus the workspace's module-boundary rule (Nx tags).
// Formatting and the fast lint live in Biome (biome.json).
import { readFileSync } from "node:fs";
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import { plugin as kvt } from "./tools/lint/src/index.ts";

const workspaceRoot = import.meta.dirname;

// The size and complexity budget (STYLE.md section 8). New code stays under the global limits; a file that was over
// them when the budget was introduced keeps its own cap in tools/lint/budget.json, which may only go down: split the
// function along its seams and lower (or drop) the file's entry, never raise it.
const budget = JSON.parse(readFileSync(new URL("./tools/lint/budget.json", import.meta.url), "utf8"));
const budgetRule = (rule, max) =>
  rule === "max-lines-per-function" || rule === "max-lines"
    ? ["error", { max, skipBlankLines: true, skipComments: true }]
    : ["error", max];
const budgetRules = (limits) => Object.fromEntries(Object.entries(limits).map(([r, max]) => [r, budgetRule(r, max)]));

// One Kubernetes client: @kvt/kube (RestClient, resourceClient, Informer, kubeConfigFromFile/loadKubeConfig) serves
// every app, tool and test. Loading @kubernetes/client-node costs a process about 80 MiB of resident memory. Its model
// types may be imported with `import type` (erased at run time); `import { type X }` is refused everywhere, since
// type stripping keeps that import and loads the module.
const CLIENT_NODE =
  "Use @kvt/kube (RestClient, resourceClient, Informer, kubeConfigFromFile), or `import type` for model types.";
const clientNodeGuard = {
  "@typescript-eslint/no-restricted-imports": [
    "error",
    { paths: [{ name: "@kubernetes/client-node", allowTypeImports: true, message: CLIENT_NODE }] },
  ],
  "@typescript-eslint/no-import-type-side-effects": "error",
  "no-restricted-syntax": [
    "error",
    { selector: "ImportExpression[source.value='@kubernetes/client-node']", message: CLIENT_NODE },
  ],
};
// Where client-node itself is the point: the lazy exec/auth-provider path of the kubeconfig loader, the API server's
// compatibility suite with client-node as its client, the bench that measures both clients, and the release's schema
// check, which reads client-node's generated models as Kubernetes' field lists.
const CLIENT_NODE_ALLOWED = [
  "libs/kube/src/client/kube-config.ts",
  "tools/local-cluster/src/apiserver/client-node.test.ts",
  "docs/decisions/benches/rest-client.bench.ts",
  "tools/release/src/schema-validation.ts",
];

export default tseslint.config(
  {
    ignores: [
      "**/node_modules/**",
      "**/build/**",
      "**/out-tsc/**",
      "**/.nx/**",
      "**/.reports/**",
      "**/.data/**",
      "native/**/*.js",
      "**/*.config.ts",
      "eslint.config.js",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: workspaceRoot },
    },
    plugins: { kvt },
    rules: {
      "kvt/module-boundaries": ["error", { workspaceRoot }],
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/require-await": "off",
    },
  },
  { files: ["**/*.ts"], rules: clientNodeGuard },
  {
    files: CLIENT_NODE_ALLOWED,
    rules: { "@typescript-eslint/no-restricted-imports": "off", "no-restricted-syntax": "off" },
  },
  { files: ["**/*.ts"], ignores: ["**/*.test.ts"], rules: budgetRules(budget.global) },
  ...Object.entries(budget.files).map(([file, limits]) => ({ files: [file], rules: budgetRules(limits) })),
  {
    files: ["**/*.test.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/unbound-method": "off",
    },
  },
);
