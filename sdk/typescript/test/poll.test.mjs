// The stream by long poll, forced with transport "poll": without it the
// poll path runs only when the WebSocket is missing (auto's fallback), so
// these tests pin it on its own. A small fake of the GraphQL API serves
// one invocation by agentEvents, holds later polls as the server does,
// and counts WebSocket upgrades, of which there must be none. They run on
// the built package (npm run build first).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { describe, it } from "node:test";
import { run, silentLogger } from "@bothy/agent";

const HOLDER = "adapter-poll-0123456789";

const alex = { id: "p1", kind: "USER", handle: "alex", displayName: "Alex" };
const trigger = { messageId: "m1", threadSeq: 1, createdAt: "2026-12-04T10:00:00Z", channelId: "c1", author: alex, role: "MEMBER", origin: "HUMAN", kind: "USER", contentMd: "@echo is the printer fixed?", truncated: false, attachments: [], replyToMessageId: null, trust: "TRIGGER", provenance: null, alreadyDelivered: false };
const context = { runId: "r1", contextFloorSeq: 0, triggerMessage: trigger, threadContext: [], channelContext: null, truncatedBeforeSeq: null, followUps: [], trustSummary: { lowest: "TRIGGER", counts: [{ trust: "TRIGGER", count: 1 }] } };
const runInfo = (state) => ({ id: "r1", threadId: "t1", state, triggeringMessageId: "m1", cancelRequested: false, endReason: null, attempt: 1, holder: HOLDER, leaseExpiresAt: new Date(Date.now() + 60_000).toISOString(), traceparent: null, answers: [] });
const invocation = { seq: "1", type: "agent.invocation", createdAt: "2026-12-04T10:00:00Z", payload: { run_id: "r1", thread_id: "t1", channel_id: "c1", message_id: "m1", attempt: 1 } };

// fake serves the operations of one run by long poll and records every
// call; events answers agentEvents (the default: the invocation after
// the cursor "", then nothing until the wait is over).
async function fake(events) {
  const seen = { ops: [], polls: [], upgrades: 0, messages: [], finishes: [], acks: [] };
  let secondPoll;
  const polledAgain = new Promise((r) => (secondPoll = r));
  const reply = (res, body) => {
    res.writeHead(200, { "Content-Type": "application/graphql-response+json" });
    res.end(JSON.stringify(body));
  };
  const srv = createServer((req, res) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => {
      const { operationName: op, variables: v } = JSON.parse(text || "{}");
      seen.ops.push(op);
      switch (op) {
        case "Viewer":
          return reply(res, { data: { viewer: { id: "a1", kind: "AGENT" } } });
        case "AgentEvents": {
          seen.polls.push(v);
          if (events) return reply(res, events(v));
          if (v.after === undefined) return reply(res, { data: { agentEvents: { events: [invocation], nextAfter: "1" } } });
          secondPoll();
          // Held like the server's long poll, until the wait is over or
          // the adapter stops reading.
          const t = setTimeout(() => reply(res, { data: { agentEvents: { events: [], nextAfter: v.after } } }), v.wait * 1000);
          res.on("close", () => clearTimeout(t));
          return;
        }
        case "RunContext":
          return reply(res, { data: { run: { context } } });
        case "StartRun":
          return reply(res, { data: { startRun: runInfo("RUNNING") } });
        case "RenewRun":
          return reply(res, { data: { renewRun: runInfo("RUNNING") } });
        case "CreateMessage":
          seen.messages.push(v);
          return reply(res, { data: { createMessage: { replayed: false, message: { id: "m2", threadId: v.threadId, threadSeq: 2 } } } });
        case "FinishRun":
          seen.finishes.push(v);
          return reply(res, { data: { finishRun: { ...runInfo(v.input.outcome), holder: null } } });
        case "RunState":
          return reply(res, { data: { run: { id: v.id, state: "COMPLETED" } } });
        case "AckAgentEvents":
          seen.acks.push(v.upTo);
          return reply(res, { data: { ackAgentEvents: { position: v.upTo } } });
      }
      reply(res, { errors: [{ message: `unexpected ${op}`, extensions: { code: "validation_failed" } }] });
    });
  });
  // A server with a WebSocket would upgrade here: the poll transport must not ask.
  srv.on("upgrade", (req, socket) => {
    seen.upgrades++;
    socket.destroy();
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${srv.address().port}`, seen, polledAgain, close: () => srv.close() };
}

describe("the stream by long poll", () => {
  it("answers a run read by agentEvents, polls on after its cursor and never opens a WebSocket", async () => {
    const f = await fake();
    const reports = [];
    try {
      await run(
        { server: f.url, token: "bothy_a_example", transport: "poll", pollWaitSeconds: 1, once: true, holder: HOLDER, logger: silentLogger, onRunDone: (r) => reports.push(r) },
        async (t) => {
          // The stream goes on while the handler works: the next poll
          // asks after the invocation's seq.
          await f.polledAgain;
          t.answer(`You asked: ${t.context.triggerMessage.contentMd}`);
        },
      );
      assert.equal(f.seen.upgrades, 0);
      assert.deepEqual(f.seen.polls.slice(0, 2), [{ wait: 1 }, { after: "1", wait: 1 }]);
      assert.deepEqual(f.seen.messages, [
        { threadId: "t1", holder: HOLDER, input: { clientMsgId: "answer-r1-m1", contentMd: "You asked: @echo is the printer fixed?", inputTrust: "TRIGGER", runId: "r1" } },
      ]);
      assert.deepEqual(f.seen.finishes, [{ id: "r1", input: { outcome: "COMPLETED" }, holder: HOLDER }]);
      // The invocation is acknowledged once it is dealt with, that is
      // once its run is claimed, not before.
      assert.deepEqual(f.seen.acks, ["1"]);
      assert.ok(f.seen.ops.indexOf("AckAgentEvents") > f.seen.ops.indexOf("StartRun"), f.seen.ops.join(" "));
      assert.equal(reports.length, 1);
      assert.equal(reports[0].outcome, "COMPLETED");
      assert.equal(reports[0].answerMessageId, "m2");
    } finally {
      f.close();
    }
  });

  it("stops for good on a cursor the server does not know", async () => {
    const f = await fake(() => ({ errors: [{ message: "unknown cursor", extensions: { code: "invalid_cursor", status: 400 } }] }));
    try {
      await assert.rejects(
        run({ server: f.url, token: "bothy_a_example", transport: "poll", after: "999", logger: silentLogger }, () => assert.fail("no run to handle")),
        /poll the agent stream/,
      );
      assert.equal(f.seen.upgrades, 0);
      // Retrying cannot help: one poll, with the cursor given.
      assert.deepEqual(f.seen.polls, [{ after: "999", wait: 25 }]);
    } finally {
      f.close();
    }
  });
});
