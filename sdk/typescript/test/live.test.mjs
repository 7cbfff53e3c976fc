// The live box writer: pieces streamed together within the interval go
// out as one update, a version race writes the whole text again on top of
// the box's version, and a person's stop marks the box done.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LiveWriter, STOPPED_STATUS, refusal, silentLogger } from "@bothy/agent";

// box is a fake of the client's two live calls that keeps the box's text
// and version, and races once when race is set.
function box({ race = false } = {}) {
  const state = { version: 0, text: "", status: null, done: false, updates: [] };
  return {
    state,
    async updateRunLive(runId, holder, u) {
      state.updates.push({ holder, ...u });
      if (race || u.baseVersion !== state.version) {
        race = false;
        state.version++;
        state.text += "(another writer)";
        throw refusal("UpdateRunLive", [{ message: "Conflict", extensions: { code: "conflict", reason: "live_version", status: 409, currentVersion: state.version } }], 200);
      }
      if (u.replace !== undefined) state.text = u.replace;
      state.text += u.append ?? "";
      if (u.status !== undefined) state.status = u.status;
      if (u.done) state.done = true;
      state.version++;
      return { runId, version: state.version, text: state.text, status: state.status, done: state.done };
    },
    async runLive(runId) {
      return { runId, version: state.version, text: state.text, status: state.status, done: state.done };
    },
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe("the live box", () => {
  it("sends pieces together at most every interval, as the run's holder", async () => {
    const b = box();
    const w = new LiveWriter(b, "r1", "adapter-0123456789abcdef", 50, silentLogger, new AbortController().signal);
    w.add("The printer ");
    await sleep(10);
    w.add("on floor 2 ");
    w.add("works.");
    await sleep(120);
    await w.close();
    assert.equal(b.state.text, "The printer on floor 2 works.");
    assert.ok(b.state.updates.length <= 2, `${b.state.updates.length} updates`);
    assert.ok(b.state.updates.every((u) => u.holder === "adapter-0123456789abcdef"));
  });
  it("writes the whole text again after another writer moved the box", async () => {
    const b = box();
    const w = new LiveWriter(b, "r1", "h", 10, silentLogger, new AbortController().signal);
    w.add("one ");
    await sleep(30);
    b.state.version += 5; // the next update meets another version
    w.add("two");
    await sleep(30);
    await w.close();
    assert.equal(b.state.text, "one two");
  });
  it("marks the box done and stopped on a person's stop", async () => {
    const b = box();
    const run = new AbortController();
    const w = new LiveWriter(b, "r1", "h", 10, silentLogger, run.signal);
    w.add("half an answer");
    await sleep(30);
    run.abort();
    await w.stopped();
    assert.equal(b.state.done, true);
    assert.equal(b.state.status, STOPPED_STATUS);
    w.add("more");
    await sleep(30);
    assert.equal(b.state.text, "half an answer");
  });
});
