/**
 * HTTP tools from a YAML file (docs/adapter.md, HTTP tools), the same
 * format as the Go SDK's httptool: each tool POSTs the model's arguments
 * as JSON to its URL, with a secret header read from the environment, and
 * hands the answer back to the model.
 * @module
 */
import { readFile } from "node:fs/promises";
import { parseDocument } from "yaml";
import type { Tool } from "./task.js";
import type { Trust } from "./types.js";

/** Options of {@link loadTools} and {@link parseTools}. */
export interface ToolOptions {
  /** Reads a secret's variable (default process.env). */
  env?: Record<string, string | undefined>;
  /** Bounds one call in ms (default 30 000). */
  timeoutMs?: number;
  /** Bounds the answer the model reads, in bytes (default 16 KiB); a longer one is cut. */
  maxAnswerBytes?: number;
  /** The fetch to use (default the global fetch). */
  fetch?: typeof fetch;
}

const namePattern = /^[A-Za-z0-9_-]{1,64}$/;
const outputTrusts: Record<string, Trust> = { "": "UNVERIFIED", unverified: "UNVERIFIED", system: "SYSTEM" };
const specKeys = new Set(["name", "description", "parameters", "consequential", "output_trust", "url", "secret_header", "secret_env"]);

/** Loads the tools of a YAML file. @throws Error naming the tool and what is wrong with it. */
export async function loadTools(path: string, opts: ToolOptions = {}): Promise<Tool[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new Error(`httptool: ${(err as Error).message}`);
  }
  return parseTools(text, opts);
}

/**
 * Parses a tools file. Unknown keys are refused (a misspelt
 * `consequential` must not make a tool run without asking), and so are
 * names that are not unique, URLs that are not http(s), an output_trust
 * other than unverified and system, and a secret_header without secret_env
 * (or one whose variable is empty).
 */
export function parseTools(text: string, opts: ToolOptions = {}): Tool[] {
  const env = opts.env ?? process.env;
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) throw new Error(`httptool: tools file: ${doc.errors[0]!.message}`);
  const root = (doc.toJS() ?? {}) as Record<string, unknown>;
  if (typeof root !== "object" || Array.isArray(root)) throw new Error("httptool: tools file: the document is no mapping");
  for (const k of Object.keys(root)) if (k !== "tools") throw new Error(`httptool: tools file: field ${k} not known`);
  const specs = (root.tools ?? []) as Record<string, unknown>[];
  if (!Array.isArray(specs)) throw new Error("httptool: tools file: tools is no list");
  const seen = new Set<string>();
  return specs.map((s, i) => {
    const name = typeof s?.name === "string" ? s.name : "";
    const where = `httptool: tool ${i + 1} (${name})`;
    if (!s || typeof s !== "object") throw new Error(`${where}: no mapping`);
    for (const k of Object.keys(s)) if (!specKeys.has(k)) throw new Error(`${where}: field ${k} not known`);
    if (!namePattern.test(name) || seen.has(name)) throw new Error(`${where}: name must be 1 to 64 of letters, digits, '_' and '-', unique`);
    seen.add(name);
    const url = typeof s.url === "string" ? s.url : "";
    let u: URL | undefined;
    try {
      u = new URL(url);
    } catch {
      u = undefined;
    }
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:") || !u.host) throw new Error(`${where}: url must be an http or https URL`);
    const trust = outputTrusts[typeof s.output_trust === "string" ? s.output_trust : s.output_trust == null ? "" : "?"];
    if (!trust) throw new Error(`${where}: output_trust must be unverified or system`);
    const header = typeof s.secret_header === "string" ? s.secret_header : "";
    const secretEnv = typeof s.secret_env === "string" ? s.secret_env : "";
    if (!header !== !secretEnv) throw new Error(`${where}: secret_header and secret_env go together`);
    let secret = "";
    if (secretEnv) {
      secret = env[secretEnv] ?? "";
      if (!secret) throw new Error(`${where}: the variable ${secretEnv} of its secret is empty`);
    }
    const params = s.parameters && typeof s.parameters === "object" ? (s.parameters as Record<string, unknown>) : { type: "object" };
    return {
      name,
      description: typeof s.description === "string" ? s.description : "",
      parameters: params,
      consequential: s.consequential === true,
      outputTrust: trust,
      call: caller(name, url, header, secret, opts),
    };
  });
}

function caller(name: string, url: string, header: string, secret: string, opts: ToolOptions): Tool["call"] {
  const max = opts.maxAnswerBytes ?? 16 << 10;
  const doFetch = opts.fetch ?? fetch;
  return async (args, signal) => {
    const body = args.trim() === "" ? "{}" : args;
    let obj: unknown;
    try {
      obj = JSON.parse(body);
    } catch {
      obj = undefined;
    }
    if (!obj || typeof obj !== "object" || Array.isArray(obj)) throw new Error("httptool: the arguments are no JSON object");
    const headers: Record<string, string> = { "Content-Type": "application/json", "User-Agent": "bothy-httptool" };
    if (header) headers[header] = secret;
    let resp: Response;
    try {
      resp = await doFetch(url, { method: "POST", headers, body, signal: AbortSignal.any([signal, AbortSignal.timeout(opts.timeoutMs ?? 30_000)]) });
    } catch (err) {
      // The URL may hold a token of its own: the error names the tool only.
      throw new Error(`httptool: ${name}: request failed`, { cause: err });
    }
    const bytes = Buffer.from(await resp.arrayBuffer());
    let text = bytes.subarray(0, max).toString("utf8").replace(/\uFFFD+$/, "");
    if (bytes.length > max) text += " (cut)";
    if (resp.status < 200 || resp.status > 299) throw new Error(`httptool: ${name}: answered ${resp.status}`);
    return text;
  };
}
