// authproxy.mjs lets a client that cannot send headers reach Bothy's /mcp:
// the conformance runner (@modelcontextprotocol/conformance, `server`
// command) has no flag for an Authorization header. Usage:
//
//   node authproxy.mjs <mcp-url> <token> [<port>]
//
// It listens on 127.0.0.1:<port> (0 or none: a free port), writes one line
// with its own /mcp address, e.g. {"url":"http://127.0.0.1:40123/mcp"}, and
// forwards every request to <mcp-url>'s origin unchanged (path, method,
// headers, body, streamed both ways), adding `Authorization: Bearer <token>`
// when the request carries none. The Host header is left as the client
// sent it (what the dns-rebinding-protection scenario probes). It runs until
// killed (SIGTERM/SIGINT end it with status 0).
import http from 'node:http';

const [target, token, port = '0'] = process.argv.slice(2);
if (!target || !token) {
	process.stderr.write('usage: node authproxy.mjs <mcp-url> <token> [<port>]\n');
	process.exit(2);
}
const up = new URL(target);

const server = http.createServer((req, res) => {
	const headers = { ...req.headers };
	if (!headers.authorization) headers.authorization = `Bearer ${token}`;
	const fwd = http.request(
		{ hostname: up.hostname, port: up.port || 80, method: req.method, path: req.url, headers },
		(r) => {
			res.writeHead(r.statusCode ?? 502, r.headers);
			r.pipe(res);
		},
	);
	fwd.on('error', (err) => {
		if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'text/plain' });
		res.end(`authproxy: ${err.message}\n`);
	});
	req.pipe(fwd);
});

server.listen(Number(port), '127.0.0.1', () => {
	const { port: p } = server.address();
	process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${p}${up.pathname}` }) + '\n');
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
