/**
 * Test support for the ISO writer's tests: makes sure the independent ISO readers are installed (beforeAll) and
 * gives each test scratch copies of its images, removed after the test (afterEach). Call once per test file.
 */
import { afterEach, beforeAll } from "vitest";
import { ensureIsoTools, writeScratchImage } from "./host-iso-tools.ts";

/** Registers the hooks; returns `scratch(image)`, which writes `image` to a file in a fresh directory. */
export function isoScratch(): (image: Buffer) => { file: string; dir: string } {
  const cleanups: (() => void)[] = [];
  // A fresh machine installs the readers with apt-get first: minutes, not the default 10 s.
  beforeAll(() => ensureIsoTools(), 600_000);
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });
  return (image) => {
    const s = writeScratchImage(image);
    cleanups.push(s.cleanup);
    return s;
  };
}
