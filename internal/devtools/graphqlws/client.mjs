// client.mjs drives one subscription through the graphql-ws client (the npm
// package, pinned in package.json) against a running Bothy server, for the
// Go tests of internal/server. Usage:
//
//   node client.mjs <ws-url> <token> <query> [variables-json]
//
// It sends the token in connection_init ({"Authorization": "Bearer ..."}),
// subscribes, and writes one JSON line to stdout per happening:
// {"next": <payload>}, {"error": <errors>}, {"complete": true} or
// {"closed": <code>, "reason": <text>}; it exits after the socket closes or
// the subscription completes. It never retries, so the Go test sees every
// close code.
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, token, query, vars] = process.argv.slice(2);
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');

let closed = false;
const client = createClient({
	url,
	webSocketImpl: WebSocket,
	lazy: false,
	retryAttempts: 0,
	connectionParams: { Authorization: `Bearer ${token}` },
	on: {
		connected: () => out({ connected: true }),
		closed: (ev) => {
			if (!closed) {
				closed = true;
				out({ closed: ev.code, reason: ev.reason });
				process.exit(0);
			}
		},
	},
	onNonLazyError: () => {},
});

client.subscribe(
	{ query, variables: vars ? JSON.parse(vars) : {} },
	{
		next: (payload) => out({ next: payload }),
		error: (err) => {
			// A close event arrives here too; the closed listener reports it.
			if (Array.isArray(err)) out({ error: err });
		},
		complete: () => {
			out({ complete: true });
			client.dispose();
		},
	},
);
