/**
 * The SDK's logging: ids, event types, outcomes and error codes, never
 * content, handles, display names or tokens.
 * @module
 */

/** Where the SDK logs; every method gets a message and fields of ids and codes. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** A logger that discards everything. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

const levels = { debug: 0, info: 1, warn: 2, error: 3 } as const;

/**
 * A logger writing one JSON line per entry to stderr, from level on
 * (default info).
 */
export function stderrLogger(level: keyof typeof levels = "info"): Logger {
  const min = levels[level];
  const write = (l: keyof typeof levels) => (msg: string, fields?: Record<string, unknown>) => {
    if (levels[l] < min) return;
    process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: l, msg, ...fields }) + "\n");
  };
  return { debug: write("debug"), info: write("info"), warn: write("warn"), error: write("error") };
}

/** A logger that adds fields to every entry of base. */
export function withFields(base: Logger, fields: Record<string, unknown>): Logger {
  return {
    debug: (m, f) => base.debug(m, { ...fields, ...f }),
    info: (m, f) => base.info(m, { ...fields, ...f }),
    warn: (m, f) => base.warn(m, { ...fields, ...f }),
    error: (m, f) => base.error(m, { ...fields, ...f }),
  };
}
