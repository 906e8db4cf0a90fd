import { describe, expect, it } from "vitest";
import { MIGRATION_FAILURE_REASONS, migrationFailureReason } from "./reason-label.ts";

describe("migrationFailureReason", () => {
  it.each([
    ["canceled", "Canceled"],
    ["completion timeout", "Timeout"],
    ["target connection lost: ECONNRESET", "ConnectionLost"],
    ["Migration failed because the target pod shut down", "TargetFailed"],
    ["Migration failed because the VMI shut down", "Other"],
    [undefined, "Other"],
  ])("maps %j to %s", (text, reason) => {
    expect(migrationFailureReason(text)).toBe(reason);
  });

  it("never returns a value outside the bounded set", () => {
    for (const text of ["", "x".repeat(500), "source aborted", "handshake failed"]) {
      expect(MIGRATION_FAILURE_REASONS).toContain(migrationFailureReason(text));
    }
  });
});
