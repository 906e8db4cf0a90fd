/**
 * How long e2e tests wait for the cluster by default, as options for `eventually` from @kvt/testing: a cluster
 * change goes through several processes (and each poll may spawn kubectl), so the wait is long and the polling slow.
 */

/** Default options for `eventually(fn, options)` in e2e: 60 s, polling every 250 ms. */
export const CLUSTER_WAIT = { timeoutMs: 60_000, intervalMs: 250 } as const;
