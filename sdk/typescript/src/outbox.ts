/**
 * The answer outbox (docs/adapter.md, the answer outbox): every answer is
 * written to a file before it is sent and removed once the server stored
 * or refused it for good, so that the next process sends an answer a dead
 * one left, under the same key and as the holder that wrote it.
 * @module
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Trust } from "./types.js";

/** One answer in the outbox, as the Go SDK writes it. */
export interface OutboxEntry {
  key: string;
  thread_id: string;
  run_id?: string;
  holder?: string;
  text: string;
  input_trust?: Trust;
  /** The files the answer attaches, sent again with it. */
  attachment_file_ids?: string[];
  /** RFC 3339 time of writing; older entries are sent first. */
  written: string;
}

/** A folder of answers not yet confirmed by the server. */
export class Outbox {
  private constructor(readonly dir: string) {}

  /** Opens (and makes) the folder. */
  static async open(dir: string): Promise<Outbox> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return new Outbox(dir);
  }

  #file(key: string): string {
    return join(this.dir, createHash("sha256").update(key).digest("hex").slice(0, 24) + ".json");
  }

  /** Writes an entry durably: a temporary file, synced, renamed over the key's file. */
  async put(e: OutboxEntry): Promise<void> {
    const tmp = join(this.dir, ".entry-" + randomBytes(6).toString("hex"));
    const f = await open(tmp, "w", 0o600);
    try {
      await f.writeFile(JSON.stringify(e));
      await f.sync();
    } finally {
      await f.close();
    }
    try {
      await rename(tmp, this.#file(e.key));
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  /** Removes the entry of key (none is fine). */
  async remove(key: string): Promise<void> {
    await rm(this.#file(key), { force: true });
  }

  /** The entries left, oldest first; unreadable ones are skipped and named in bad. */
  async pending(): Promise<{ entries: OutboxEntry[]; bad: string[] }> {
    const entries: OutboxEntry[] = [];
    const bad: string[] = [];
    for (const name of await readdir(this.dir)) {
      if (!name.endsWith(".json")) continue;
      try {
        const e = JSON.parse(await readFile(join(this.dir, name), "utf8")) as OutboxEntry;
        if (!e.key || !e.thread_id) throw new Error("incomplete");
        entries.push(e);
      } catch {
        bad.push(name);
      }
    }
    entries.sort((a, b) => Date.parse(a.written) - Date.parse(b.written));
    return { entries, bad };
  }
}
