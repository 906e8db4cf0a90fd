import { describe, expect, it } from "vitest";
import { optionsProblem } from "./options-decode.ts";

const E = "Can not unmarshal Request body to struct, error: json: cannot unmarshal";

describe("optionsProblem (subresource bodies as encoding/json decodes them)", () => {
  it.each([
    ["stop", { gracePeriod: "x" }, `${E} string into Go struct field StopOptions.gracePeriod of type int64`],
    ["stop", { gracePeriod: 1.5 }, `${E} number 1.5 into Go struct field StopOptions.gracePeriod of type int64`],
    [
      "stop",
      { gracePeriod: 2 ** 63 },
      `${E} number 9223372036854776000 into Go struct field StopOptions.gracePeriod of type int64`,
    ],
    [
      "restart",
      { gracePeriodSeconds: [] },
      `${E} array into Go struct field RestartOptions.gracePeriodSeconds of type int64`,
    ],
    ["start", { paused: "true" }, `${E} string into Go struct field StartOptions.paused of type bool`],
    ["start", { dryRun: "All" }, `${E} string into Go struct field StartOptions.dryRun of type []string`],
    ["pause", { dryRun: [1] }, `${E} number into Go struct field PauseOptions.dryRun of type string`],
    [
      "migrate",
      { addedNodeSelector: { a: 1 } },
      `${E} number into Go struct field MigrateOptions.addedNodeSelector of type string`,
    ],
    ["stop", { dryRun: ["x"] }, 'Invalid dryRun value "x": supported values: "All"'],
  ])("%s %j is 400: %s", (action, body, message) => {
    expect(optionsProblem(action, body)).toBe(message);
  });

  it.each([
    ["stop", { gracePeriod: 0, dryRun: ["All"] }],
    ["restart", { gracePeriodSeconds: 0 }],
    ["start", { paused: true, unknown: "ignored, as encoding/json ignores it" }],
    ["migrate", { addedNodeSelector: { "kubernetes.io/hostname": "node01" } }],
    ["stop", { gracePeriod: null, dryRun: null }],
  ])("%s %j decodes", (action, body) => {
    expect(optionsProblem(action, body)).toBeUndefined();
  });
});
