/**
 * The outage a client sees across a live migration, from the times its probe's replies arrived: the longest
 * silence between two consecutive replies inside a window (the nested lane's network checks and
 * `npm run bench -- network` both report it).
 */

/** The longest time between consecutive replies (ms) inside [fromMs, toMs], and when it began. */
export function longestGap(replies: readonly number[], fromMs: number, toMs: number): { ms: number; startMs: number } {
  const inside = replies.filter((t) => t >= fromMs && t <= toMs);
  let gap = { ms: 0, startMs: fromMs };
  for (let i = 1; i < inside.length; i++) {
    const a = inside[i - 1] ?? 0;
    const b = inside[i] ?? 0;
    if (b - a > gap.ms) gap = { ms: b - a, startMs: a };
  }
  return gap;
}
