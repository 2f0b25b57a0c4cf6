/**
 * Which answers a run continued from a parked image is given again (src/sandbox/pool/image-answers.ts):
 * the subtle cases are an answer sent before the image but received after it (a search the
 * sidecar answers at once, while the worker parks), and a run moved twice before its VM
 * parks anew.
 */
import { describe, expect, it } from "vitest";
import { ImageAnswers } from "../../src/sandbox/pool/image-answers.js";
import type { AnswerMessage } from "../../src/sandbox/pool/task-protocol.js";

const answer = (callId: string): AnswerMessage => ({ t: "answer", callId, ok: true, json: `"${callId}"` });
const ids = (list: AnswerMessage[]) => list.map((a) => a.callId);

describe("answers a parked image may lack", () => {
  it("keeps an answer the worker had not received when its VM parked", () => {
    const a = new ImageAnswers();
    a.startAttempt(false);
    a.sent(answer("search-1")); // answered while the worker was already parking
    a.parked(0);
    expect(ids(a.forImage())).toEqual(["search-1"]);
  });

  it("forgets answers the worker reported receiving, on any message or a new image", () => {
    const a = new ImageAnswers();
    a.startAttempt(false);
    a.sent(answer("c1"));
    a.sent(answer("c2"));
    a.received(1);
    expect(ids(a.forImage())).toEqual(["c2"]);
    a.received(1); // a stale count changes nothing
    a.sent(answer("c3"));
    a.parked(2);
    expect(ids(a.forImage())).toEqual(["c3"]);
    a.parked(3);
    expect(ids(a.forImage())).toEqual([]);
  });

  it("carries what the image lacks across attempts until the continued VM parks anew", () => {
    const a = new ImageAnswers();
    a.startAttempt(false);
    a.sent(answer("c1"));
    a.parked(0);
    // Moved: the new attempt is given c1; answers arriving meanwhile are added.
    a.sent(answer("c2"));
    expect(ids(a.startAttempt(true))).toEqual(["c1", "c2"]);
    a.sent(answer("c3"));
    // Moved again before it parked: the same image, so everything it lacks, in order.
    expect(ids(a.startAttempt(true))).toEqual(["c1", "c2", "c3"]);
    // The continued VM parks (its start answers consumed) having received nothing on its port.
    a.sent(answer("c4"));
    a.parked(0);
    expect(ids(a.forImage())).toEqual(["c4"]);
  });

  it("a run started again from scratch carries nothing", () => {
    const a = new ImageAnswers();
    a.startAttempt(false);
    a.sent(answer("c1"));
    expect(a.startAttempt(false)).toEqual([]);
    expect(a.forImage()).toEqual([]);
  });
});
