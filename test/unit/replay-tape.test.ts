/**
 * The replay tape (src/sandbox/worker/replay-tape.ts): the clock's run-length encoding reads
 * back exactly, a busy clock stays small, the cap cuts the record and says where, a secret
 * answer is kept as a mark only, and the player names the first place a replay departs from
 * its tape (an extra or a changed call, an unused answer, a clock read past the end).
 */
import { describe, expect, it, vi } from "vitest";
import { MAX_TAPE_BYTES, TapePlayer, TapeRecorder } from "../../src/sandbox/worker/replay-tape.js";
import type { WorkerMessage } from "../../src/sandbox/pool/task-protocol.js";

const call = (callId: string, input: string): WorkerMessage => ({ t: "call", callId, via: "tools", target: "core:x", path: "", inputJson: input });

describe("replay tape", () => {
  it("the clock reads back as recorded; 600,000 reads over 300 ms take under 4 KB", () => {
    const rec = new TapeRecorder();
    const now = vi.spyOn(Date, "now");
    const values: number[] = [];
    let t = 1_800_000_000_000;
    for (let ms = 0; ms < 300; ms++) {
      t += 1;
      for (let i = 0; i < 2_000; i++) {
        now.mockReturnValueOnce(t);
        values.push(rec.clock());
      }
    }
    now.mockRestore();
    expect(rec.tape.clock.length).toBe(600);
    expect(JSON.stringify(rec.tape.clock).length).toBeLessThan(4_000);
    const player = new TapePlayer(structuredClone(rec.tape));
    expect(values.map(() => player.clock())).toEqual(values);
    player.clock();
    expect(player.divergence?.at).toBe("clock");
  });

  it("past MAX_TAPE_BYTES the tape is cut, and a replay that reaches the cut is incomplete, not diverged", () => {
    const rec = new TapeRecorder();
    const big = "x".repeat(64 * 1024);
    for (let i = 0; i * big.length <= MAX_TAPE_BYTES + big.length; i++) rec.batch([{ t: "answer", callId: `c${i}`, ok: true, json: JSON.stringify(big) }]);
    expect(rec.tape.truncated).toMatch(/passed 1048576 bytes/);
    const player = new TapePlayer(rec.tape);
    while (player.next());
    expect(player.divergence).toBeUndefined();
    expect(player.incomplete).toMatch(/the record was cut/);
  });

  it("a secret answer is kept as a mark; the player stops there", () => {
    const rec = new TapeRecorder();
    rec.batch([{ t: "answer", callId: "c1", ok: true, json: '"hunter2"', secret: true }]);
    expect(JSON.stringify(rec.tape)).not.toContain("hunter2");
    expect(rec.tape.events).toEqual([{ batch: [{ c: "c1", secret: 1, ok: true }] }]);
    const player = new TapePlayer(rec.tape);
    expect(player.next()).toBeUndefined();
    expect(player.incomplete).toMatch(/call c1 was answered with a secret/);
  });

  it("names the first call that differs, and an extra one", () => {
    const rec = new TapeRecorder();
    rec.sent(call("c1", '{"n":1}'));
    rec.sent(call("c2", '{"n":2}'));
    const changed = new TapePlayer(structuredClone(rec.tape));
    changed.sent(call("c1", '{"n":1}'));
    changed.sent(call("c2", '{"n":3}'));
    expect(changed.divergence).toMatchObject({ at: "nested call 2", recorded: { input: '{"n":2}' }, replayed: { input: '{"n":3}' } });
    const extra = new TapePlayer(structuredClone(rec.tape));
    for (const m of [call("c1", '{"n":1}'), call("c2", '{"n":2}'), call("c3", "{}")]) extra.sent(m);
    expect(extra.divergence).toMatchObject({ at: "nested call 3", recorded: "nothing more" });
    const fewer = new TapePlayer(structuredClone(rec.tape));
    fewer.sent(call("c1", '{"n":1}'));
    fewer.finish();
    expect(fewer.divergence).toMatchObject({ at: "the end of the segment" });
  });

  it("a long input is compared by its hash; the recorded ids and seed are handed out in order", () => {
    const rec = new TapeRecorder();
    const long = JSON.stringify("y".repeat(10_000));
    rec.sent(call("c1", long));
    rec.id("c_one");
    rec.seed("[1,2,3,4]");
    expect(rec.tape.sent[0]).toMatchObject({ h: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(JSON.stringify(rec.tape)).not.toContain("yyyy");
    const player = new TapePlayer(rec.tape);
    player.sent(call("c1", long));
    expect(player.divergence).toBeUndefined();
    expect([player.id(), player.seed()]).toEqual(["c_one", "[1,2,3,4]"]);
  });

  it("the player stops the VM at the recorded poll, and at the first poll after a divergence", () => {
    const rec = new TapeRecorder();
    rec.poll(false, false, undefined);
    rec.poll(true, false, { timeout: true });
    const player = new TapePlayer(rec.tape);
    expect(player.poll().stop).toBe(false);
    expect(player.poll().stop).toBe(true);
    const other = new TapePlayer({ clock: [], seeds: [], ids: [], events: [], sent: [], polls: 0 });
    other.sent(call("c1", "{}"));
    expect(other.poll().stop).toBe(true);
  });
});
