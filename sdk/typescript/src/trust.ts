/**
 * Trust levels and the run's in-play trust: the lowest trust of
 * everything the model has read in the run, which gates consequential
 * tools (docs/adapter.md, provenance and the in-play trust).
 * @module
 */
import type { RunContextMessage, Trust } from "./types.js";

/** The rank of a level; an unknown level ranks with UNVERIFIED (0). */
export function trustRank(t: string | null | undefined): number {
  switch (t) {
    case "SELF":
      return 1;
    case "SYSTEM":
      return 2;
    case "AUTHORIZED":
      return 3;
    case "TRIGGER":
      return 4;
  }
  return 0;
}

/** Returns t when it is a known level, else UNVERIFIED: an unknown level is never trusted. */
export function knownTrust(t: string | null | undefined): Trust {
  return trustRank(t) === 0 ? "UNVERIFIED" : (t as Trust);
}

/** The lower of two levels (unknown levels count as UNVERIFIED). */
export function lowerTrust(a: string | null | undefined, b: string | null | undefined): Trust {
  return trustRank(b) < trustRank(a) ? knownTrust(b) : knownTrust(a);
}

/**
 * Reports whether a consequential tool may run without asking at this
 * in-play trust: only TRIGGER, SELF and SYSTEM. AUTHORIZED is below the
 * gate on purpose: a colleague may instruct the agent, but a consequential
 * action of this run is put to the person who started it.
 */
export function toolsAllowed(t: string | null | undefined): boolean {
  return t === "TRIGGER" || t === "SELF" || t === "SYSTEM";
}

/** The standing of an element: the lower of its trust and provenance (its trust when the server sent none). */
export function standing(m: Pick<RunContextMessage, "trust" | "provenance">): Trust {
  return m.provenance ? lowerTrust(m.trust, m.provenance) : knownTrust(m.trust);
}

const inputContext = "with untrusted messages in the conversation";
const inputOthers = "with requests of other people in the conversation";
const inputOther = "after reading other untrusted input";
/** What an approval card names once a file's text was read. */
export const inputFile = "after reading an attached file";
/** What an approval card says when nothing untrusted was recorded. */
export const inputUnknown = "with untrusted input in play";

/**
 * The in-play trust of one run. It only goes down: the context's lowest,
 * every tool result at the tool's output trust, whatever a handler read
 * itself. It also remembers why it went down, for the approval card.
 */
export class InPlay {
  #level: Trust;
  #context: Trust | "" = "";
  #tools: string[] = [];
  #other = false;
  #file = false;
  #others = false;

  /** Starts at the context's lowest (unknown: UNVERIFIED). */
  constructor(lowest: string | null | undefined) {
    this.#level = knownTrust(lowest);
    this.#noteContext(this.#level);
  }

  /** The current level. */
  get level(): Trust {
    return this.#level;
  }

  /** Whether a consequential tool may run at once: the level passes the gate and no other person's request is in play. */
  allowed(): boolean {
    return toolsAllowed(this.#level) && !this.#others;
  }

  /** Lowers the level by a context read again (a follow-up round). */
  lowerContext(lowest: string | null | undefined): void {
    this.#level = lowerTrust(this.#level, lowest);
    this.#noteContext(knownTrust(lowest));
  }

  /** Notes elements whose author is another person with trigger. */
  noteElements(elems: RunContextMessage[]): void {
    for (const m of elems) if (standing(m) === "AUTHORIZED") this.#others = true;
  }

  /** Lowers the level by a tool's result. */
  lowerTool(name: string, t: string | null | undefined): void {
    this.#level = lowerTrust(this.#level, t);
    if (!toolsAllowed(knownTrust(t)) && !this.#tools.includes(name)) this.#tools.push(name);
  }

  /** Lowers the level by something else a handler read. */
  lowerOther(t: string | null | undefined): void {
    this.#level = lowerTrust(this.#level, t);
    if (!toolsAllowed(knownTrust(t))) this.#other = true;
  }

  /** Lowers the level to UNVERIFIED: a file's text was read, data whoever uploaded it. */
  lowerFile(): void {
    this.#level = "UNVERIFIED";
    this.#file = true;
  }

  /** The untrusted inputs in play, in the words of the approval card. */
  inputs(): string[] {
    const out: string[] = [];
    if (this.#context !== "" && this.#context !== "AUTHORIZED") out.push(inputContext);
    else if (this.#context === "AUTHORIZED" || this.#others) out.push(inputOthers);
    if (this.#tools.length > 0) out.push("after reading the output of " + joinAnd(this.#tools));
    if (this.#file) out.push(inputFile);
    if (this.#other) out.push(inputOther);
    return out;
  }

  #noteContext(lowest: Trust): void {
    if (toolsAllowed(lowest)) return;
    if (this.#context === "" || trustRank(lowest) < trustRank(this.#context)) this.#context = lowest;
  }
}

function joinAnd(names: string[]): string {
  if (names.length === 1) return names[0]!;
  return names.slice(0, -1).join(", ") + " and " + names[names.length - 1];
}
