/**
 * How long the KubeVirt CA and the components' certificates live and when they are renewed, from the KubeVirt CR's
 * `spec.certificateRotateStrategy.selfSigned` (pure), as virt-operator reads it (resource/apply/certificates.go):
 *
 * | setting                | field (deprecated field first: it wins, for upgrades) | default               |
 * | ---------------------- | ----------------------------------------------------- | --------------------- |
 * | CA duration            | caRotateInterval, ca.duration                          | 168h (7 days)         |
 * | CA renewBefore/overlap | caOverlapInterval, ca.renewBefore                      | 20% of the CA's: 33h36m |
 * | certificate duration   | certRotateInterval, server.duration                    | 24h                   |
 * | certificate renewBefore| server.renewBefore                                     | 20% of its: 4h48m     |
 *
 * A value that does not parse as a Go duration, a duration under a second, or a renewBefore not shorter than its
 * duration (which would renew on every pass) is not used: the default applies and the problem is reported.
 */
import { formatGoDuration, type KubeVirtSelfSignConfiguration, parseGoDuration } from "@kvt/api";

/** KubeVirt's default CA lifetime (Duration7d). */
export const DEFAULT_CA_DURATION_MS = 7 * 24 * 3_600_000;
/** KubeVirt's default certificate lifetime (Duration1d). */
export const DEFAULT_CERT_DURATION_MS = 24 * 3_600_000;
/** The shortest duration accepted. */
const MIN_DURATION_MS = 1000;

/** Durations in milliseconds. */
export interface CertSettings {
  readonly caDurationMs: number;
  /** Also how long an old CA stays in the bundle after a new one is made (KubeVirt's overlap). */
  readonly caRenewBeforeMs: number;
  readonly certDurationMs: number;
  readonly certRenewBeforeMs: number;
}

/** The settings and what was wrong with the CR's values (empty when nothing). */
export interface CertSettingsResult {
  readonly settings: CertSettings;
  readonly problems: readonly string[];
}

function durationOf(
  field: string,
  text: string | undefined,
  fallback: number,
  problems: string[],
  max = Number.POSITIVE_INFINITY,
): number {
  if (text === undefined) return fallback;
  const ms = parseGoDuration(text);
  if (ms === undefined) {
    problems.push(`${field} ${JSON.stringify(text)} is not a duration; using ${formatGoDuration(fallback)}`);
    return fallback;
  }
  if (ms < MIN_DURATION_MS || ms >= max) {
    const bound = max === Number.POSITIVE_INFINITY ? "at least 1s" : `at least 1s and under ${formatGoDuration(max)}`;
    problems.push(`${field} ${text} must be ${bound}; using ${formatGoDuration(fallback)}`);
    return fallback;
  }
  return ms;
}

/** The rotation settings of `selfSigned` (KubeVirt's defaults where unset). */
export function certSettings(selfSigned: KubeVirtSelfSignConfiguration | undefined): CertSettingsResult {
  const problems: string[] = [];
  const s = selfSigned ?? {};
  const caField = s.caRotateInterval !== undefined ? "caRotateInterval" : "ca.duration";
  const caDurationMs = durationOf(caField, s.caRotateInterval ?? s.ca?.duration, DEFAULT_CA_DURATION_MS, problems);
  const caRenewField = s.caOverlapInterval !== undefined ? "caOverlapInterval" : "ca.renewBefore";
  const caRenewBeforeMs = durationOf(
    caRenewField,
    s.caOverlapInterval ?? s.ca?.renewBefore,
    caDurationMs * 0.2,
    problems,
    caDurationMs,
  );
  const certField = s.certRotateInterval !== undefined ? "certRotateInterval" : "server.duration";
  const certDurationMs = durationOf(
    certField,
    s.certRotateInterval ?? s.server?.duration,
    DEFAULT_CERT_DURATION_MS,
    problems,
  );
  const certRenewBeforeMs = durationOf(
    "server.renewBefore",
    s.server?.renewBefore,
    certDurationMs * 0.2,
    problems,
    certDurationMs,
  );
  return { settings: { caDurationMs, caRenewBeforeMs, certDurationMs, certRenewBeforeMs }, problems };
}
