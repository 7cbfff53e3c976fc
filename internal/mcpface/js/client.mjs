// client.mjs is a real MCP client on the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json) for the Go tests of
// internal/mcpface: it talks to a running Bothy's /mcp over Streamable HTTP
// with a bearer token. Usage:
//
//   node client.mjs <mcp-url> <token> [<tool> <json-args>]...
//
// It connects (initialize, then notifications/initialized), lists the tools
// (following nextCursor) and writes one JSON line:
//
//   {"server":{"name":...,"version":...,"protocolVersion":...,"sessionId":...,
//    "capabilities":{...},"instructions":...},
//    "tools":[{"name":...,"description":...,"inputSchema":{...}}, ...]}
//
// (outputSchema is added to a tool when the server publishes one; sessionId
// and instructions are null when the server gives none.) Then, for each
// <tool> <json-args> pair, it calls the tool and writes one line:
//
//   {"tool":"<tool>","isError":false,"structuredContent":{...}|null,"text":"..."}
//
// where text is the text content of the result, concatenated. A tool error
// (isError) is an answer, not a failure. A transport or protocol error (an
// HTTP 401, a JSON-RPC error such as an unknown tool, a result the SDK
// rejects) ends the run: a message on stderr and exit status 1; wrong usage
// exits 2.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');
const fail = (msg, status = 1) => {
	process.stderr.write(`client.mjs: ${msg}\n`);
	process.exit(status);
};

const [url, token, ...calls] = process.argv.slice(2);
if (!url || !token || calls.length % 2 !== 0) {
	fail('usage: node client.mjs <mcp-url> <token> [<tool> <json-args>]...', 2);
}
const pairs = [];
for (let i = 0; i < calls.length; i += 2) {
	try {
		pairs.push([calls[i], JSON.parse(calls[i + 1])]);
	} catch (err) {
		fail(`arguments of ${calls[i]} are not JSON: ${err.message}`, 2);
	}
}

const describe = (err) => {
	const parts = [err?.name ?? 'Error'];
	if (err?.code !== undefined) parts.push(`code ${err.code}`);
	const cause = err?.cause ? ` (${err.cause.code ?? err.cause.message ?? err.cause})` : '';
	return `${parts.join(' ')}: ${err?.message ?? String(err)}${cause}`;
};

const transport = new StreamableHTTPClientTransport(new URL(url), {
	requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'bothy-mcpjs', version: '0.0.0' });
client.onerror = () => {}; // a failed optional GET stream is not the test's business

try {
	await client.connect(transport);

	const tools = [];
	let cursor;
	do {
		const page = await client.listTools(cursor ? { cursor } : {});
		for (const t of page.tools) {
			const tool = { name: t.name, description: t.description ?? null, inputSchema: t.inputSchema };
			if (t.outputSchema) tool.outputSchema = t.outputSchema;
			tools.push(tool);
		}
		cursor = page.nextCursor;
	} while (cursor);

	out({
		server: {
			...(client.getServerVersion() ?? {}),
			protocolVersion: transport.protocolVersion ?? null,
			sessionId: transport.sessionId ?? null,
			capabilities: client.getServerCapabilities() ?? null,
			instructions: client.getInstructions() ?? null,
		},
		tools,
	});

	for (const [name, args] of pairs) {
		const res = await client.callTool({ name, arguments: args });
		const text = (res.content ?? [])
			.filter((c) => c.type === 'text')
			.map((c) => c.text)
			.join('');
		out({ tool: name, isError: res.isError === true, structuredContent: res.structuredContent ?? null, text });
	}
} catch (err) {
	fail(describe(err));
}

await client.close().catch(() => {});
process.exit(0);
