/**
 * What the model backends share.
 * @module
 */
import { BadModelAnswerError, ModelHTTPError } from "../errors.js";
import type { Prompt } from "../render.js";
import { Task, currentTask } from "../task.js";

/** Appended to an answer cut at the model's length limit. */
export const LENGTH_NOTE = "\n\n_(This answer was cut off at the model's length limit.)_";

/** Answers a rendered prompt. */
export interface Model {
  /** The answer's text; the model's streamed pieces reach the run's live box. */
  answer(prompt: Prompt, signal?: AbortSignal): Promise<string>;
}

/**
 * The Task the model call belongs to: the run's when it runs inside a
 * handler, else one of its own whose in-play trust starts at the prompt's
 * lowest (a consequential tool then needs an approval nobody can give).
 */
export function taskFor(prompt: Prompt, signal: AbortSignal | undefined): Task {
  return currentTask() ?? Task.forPrompt(prompt, signal);
}

/** Maps a library's error to the SDK's: an error status to {@link ModelHTTPError}, a body that is no answer to {@link BadModelAnswerError}. */
export function modelError(err: unknown, signal: AbortSignal): unknown {
  if (signal.aborted) return signal.reason ?? err;
  const status = (err as { status?: unknown })?.status;
  if (typeof status === "number" && status > 0) return new ModelHTTPError(status, { cause: err });
  if (err instanceof SyntaxError) return new BadModelAnswerError("the body is no JSON");
  return err;
}
