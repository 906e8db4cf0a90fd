import { describe, expect, it } from "vitest";
import { certSettings } from "./cert-settings.ts";

const H = 3_600_000;

describe("certSettings()", () => {
  it("uses KubeVirt's defaults: CA 7 days renewed 20% ahead, certificates 24h renewed 20% ahead", () => {
    expect(certSettings(undefined)).toEqual({
      settings: {
        caDurationMs: 168 * H,
        caRenewBeforeMs: 33.6 * H,
        certDurationMs: 24 * H,
        certRenewBeforeMs: 4.8 * H,
      },
      problems: [],
    });
  });

  it("reads ca and server durations, with renewBefore defaulting to 20% of the duration given", () => {
    const { settings } = certSettings({ ca: { duration: "48h" }, server: { duration: "1h", renewBefore: "10m" } });
    expect(settings).toEqual({
      caDurationMs: 48 * H,
      caRenewBeforeMs: 9.6 * H,
      certDurationMs: H,
      certRenewBeforeMs: 600_000,
    });
  });

  it("lets the deprecated fields win, as virt-operator does for upgrades", () => {
    const { settings } = certSettings({
      caRotateInterval: "10h",
      caOverlapInterval: "1h",
      certRotateInterval: "2h",
      ca: { duration: "99h", renewBefore: "9h" },
      server: { duration: "99h" },
    });
    expect(settings).toEqual({
      caDurationMs: 10 * H,
      caRenewBeforeMs: H,
      certDurationMs: 2 * H,
      certRenewBeforeMs: 0.4 * H,
    });
  });

  it.each([
    [{ server: { duration: "one day" } }, 'server.duration "one day" is not a duration; using 24h0m0s'],
    [{ server: { duration: "0s" } }, "server.duration 0s must be at least 1s; using 24h0m0s"],
    [
      { server: { duration: "1h", renewBefore: "2h" } },
      "server.renewBefore 2h must be at least 1s and under 1h0m0s; using 12m0s",
    ],
    [{ caOverlapInterval: "200h" }, "caOverlapInterval 200h must be at least 1s and under 168h0m0s; using 33h36m0s"],
  ])("falls back to the default for %j and says why", (selfSigned, problem) => {
    expect(certSettings(selfSigned).problems).toEqual([problem]);
  });
});
