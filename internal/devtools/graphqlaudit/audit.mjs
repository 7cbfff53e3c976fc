#!/usr/bin/env node
// audit.mjs runs the GraphQL-over-HTTP conformance audit of the npm package
// graphql-http (auditServer) against a running server and prints the results
// as ONE JSON document on stdout:
//
//   {"results":[{"id":"4655","name":"MUST accept application/json and match the content-type","status":"ok"},
//               {"id":"22EB","name":"SHOULD ...","status":"warn","reason":"..."}]}
//
// status is graphql-http's: "ok"; or, for a failed audit, "error" (a MUST),
// "warn" (a SHOULD) or "notice" (a MAY). reason is present only when status
// is not "ok"; it is graphql-http's reason followed by what the server
// answered, e.g. `Response status code is not 200 (got HTTP 401: {"errors":...})`.
// Results keep graphql-http's order; ids are stable, names are prose.
//
// Usage:
//   node audit.mjs URL [TOKEN]
//   BOTHY_AUDIT_URL=URL BOTHY_AUDIT_TOKEN=TOKEN node audit.mjs
//
// URL is the GraphQL endpoint, e.g. http://127.0.0.1:8080/graphql. TOKEN, if
// given, is sent on every request as `Authorization: Bearer TOKEN` (a TOKEN
// that already contains a space, like "Basic abc", is sent as is). Prefer
// the environment variable for a real token: argv is visible to other users
// of the machine. BOTHY_AUDIT_TIMEOUT_MS (default 15000) bounds each request.
//
// Exit status: 0 whenever the audit ran, whatever its results (the caller
// judges them); 2 when it could not run (bad arguments, graphql-http not
// installed, server unreachable, a request timing out), with the cause on
// stderr and nothing on stdout. Run ./install.sh first.

const usage =
  'usage: node audit.mjs URL [TOKEN]   (or env BOTHY_AUDIT_URL, BOTHY_AUDIT_TOKEN)';

function fail(msg) {
  process.stderr.write(`audit.mjs: ${msg}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
if (args.length > 2 || args.includes('-h') || args.includes('--help')) {
  fail(usage);
}
const rawURL = args[0] || process.env.BOTHY_AUDIT_URL || '';
const token = args[1] || process.env.BOTHY_AUDIT_TOKEN || '';
const timeoutMs = Number(process.env.BOTHY_AUDIT_TIMEOUT_MS || 15000);

if (!rawURL) fail(`no server URL\n${usage}`);
let url;
try {
  url = new URL(rawURL);
} catch {
  fail(`not a URL: ${JSON.stringify(rawURL)}`);
}
if (url.protocol !== 'http:' && url.protocol !== 'https:') {
  fail(`not an http(s) URL: ${rawURL}`);
}
if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
  fail(`BOTHY_AUDIT_TIMEOUT_MS is not a positive number`);
}
if (typeof fetch !== 'function') {
  fail(`this node (${process.version}) has no global fetch; use node >= 18`);
}

let auditServer;
try {
  ({ auditServer } = await import('graphql-http'));
} catch (err) {
  fail(`cannot load graphql-http (run internal/devtools/graphqlaudit/install.sh): ${err.message}`);
}

const authorization = !token ? '' : token.includes(' ') ? token : `Bearer ${token}`;

// fetchWithAuth adds the Authorization header to every audit request and
// bounds each one in time, keeping whatever headers and signal the audit set.
async function fetchWithAuth(input, init = {}) {
  const headers = new Headers(init.headers);
  if (authorization) headers.set('authorization', authorization);
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
  return fetch(input, { ...init, headers, signal });
}

// describe returns what the server answered, to append to a failure reason.
async function describe(res) {
  if (!res || typeof res.status !== 'number') return '';
  let body = '';
  try {
    if (!res.bodyUsed) body = (await res.text()).replace(/\s+/g, ' ').trim();
  } catch {
    // the body may already be consumed or broken: the status is enough
  }
  if (body.length > 300) body = `${body.slice(0, 300)}…`;
  return ` (got HTTP ${res.status}${body ? `: ${body}` : ''})`;
}

let results;
try {
  results = await auditServer({ url: url.toString(), fetchFn: fetchWithAuth });
} catch (err) {
  const cause = err && err.cause ? ` (${err.cause.code || err.cause.message || err.cause})` : '';
  fail(`audit of ${url} could not run: ${err && err.message ? err.message : err}${cause}`);
}

const out = [];
for (const r of results) {
  const item = { id: r.id, name: r.name, status: r.status };
  if (r.status !== 'ok') item.reason = `${r.reason}${await describe(r.response)}`;
  out.push(item);
}
process.stdout.write(`${JSON.stringify({ results: out })}\n`);
process.exit(0);
