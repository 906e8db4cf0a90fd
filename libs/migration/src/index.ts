/** @kvt/migration: Live-migration control: protocol, convergence policy (downtime budget, auto-converge), progress and downtime accounting. */
export {};
